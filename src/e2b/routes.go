package e2b

import (
	"net/http"
	"slices"
)

// authKind is what authorizes a route's requests. It is declared next to
// each route so the whole surface's access rules can be read (and tested)
// from one table instead of from scattered registrations.
type authKind int

const (
	// authNone routes answer anyone: the health check and the catch-all,
	// which names nothing.
	authNone authKind = iota
	// authKey routes need an API key (X-API-KEY) and act in its
	// namespace.
	authKey
	// authSignature routes are authorized by a signature in the URL the
	// surface handed out, not by a key: the SDK uploads without one.
	authSignature
)

func (k authKind) String() string {
	switch k {
	case authNone:
		return "none"
	case authKey:
		return "key"
	case authSignature:
		return "signature"
	}
	return "unknown"
}

// route is one registration of the surface's mux.
type route struct {
	pattern string
	handler http.Handler
	auth    authKind
}

// keyed is a route whose handler runs for an authenticated caller.
func (s *Server) keyed(pattern string, h handlerFunc) route {
	return route{pattern: pattern, handler: s.authed(h), auth: authKey}
}

// routes is every route the surface serves. NewServer registers exactly
// these, so Routes can list what is reachable and nothing reachable is
// missing from it.
func (s *Server) routes() []route {
	rs := []route{
		{pattern: "GET /health", handler: http.HandlerFunc(s.serveHealth), auth: authNone},

		s.keyed("POST /sandboxes", s.createSandbox),
		s.keyed("POST /v2/sandboxes", s.createSandbox),
		s.keyed("GET /sandboxes", s.listSandboxesV1),
		s.keyed("GET /v2/sandboxes", s.listSandboxesV2),
		s.keyed("GET /sandboxes/{sandboxID}", s.getSandbox),
		s.keyed("DELETE /sandboxes/{sandboxID}", s.killSandbox),
		s.keyed("POST /sandboxes/{sandboxID}/timeout", s.setTimeout),
		s.keyed("POST /sandboxes/{sandboxID}/refreshes", s.refresh),
		s.keyed("POST /sandboxes/{sandboxID}/pause", s.pause),
		s.keyed("POST /sandboxes/{sandboxID}/resume", s.resume),
		s.keyed("POST /sandboxes/{sandboxID}/connect", s.connect),
		s.keyed("POST /v2/sandboxes/{sandboxID}/connect", s.connect),
		s.keyed("GET /sandboxes/{sandboxID}/metrics", s.metrics),
		s.keyed("GET /sandboxes/metrics", s.batchMetrics),
		s.keyed("POST /sandboxes/{sandboxID}/snapshots", s.createSnapshot),
		s.keyed("POST /sandboxes/{sandboxID}/fork", s.fork),
		s.keyed("GET /snapshots", s.listSnapshots),
		s.keyed("DELETE /templates/{templateID}", s.deleteTemplate),
		s.keyed("GET /templates", s.listTemplates),
		s.keyed("GET /v2/templates", s.listTemplates),
		s.keyed("GET /templates/{templateID}", s.getTemplate),
		// GET /templates/aliases/{alias} and GET /templates/{templateID}/tags
		// overlap as patterns (/templates/aliases/tags); one route tells them
		// apart, the alias lookup first.
		s.keyed("GET /templates/{first}/{second}", s.templateSubresource),
		s.keyed("POST /templates/tags", s.assignTags),
		s.keyed("DELETE /templates/tags", s.removeTags),
		s.keyed("GET /volumes", s.listVolumes),
		s.keyed("PATCH /templates/{templateID}", s.updateTemplate(false)),
		s.keyed("PATCH /v2/templates/{templateID}", s.updateTemplate(true)),
	}
	rs = append(rs, s.buildRoutes()...)
	rs = append(rs, s.unsupportedRoutes()...)
	return append(rs, route{
		pattern: "/",
		handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusNotFound, "no such endpoint")
		}),
		auth: authNone,
	})
}

// Routes lists the method and pattern of every route the surface serves,
// sorted; which ones there are depends on the configuration (the build
// API and its upload route).
func (s *Server) Routes() []string {
	out := make([]string, 0, len(s.table))
	for _, r := range s.table {
		out = append(out, r.pattern)
	}
	slices.Sort(out)
	return out
}
