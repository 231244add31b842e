package e2b

import "net/http"

// The SDK operations this surface does not serve, each with the reason in
// the answer: a caller learns why and what to do instead, never "no such
// endpoint". tests/e2e/sdkops checks that every operation the SDK's own
// OpenAPI types list has a route.
var unsupported = []struct {
	patterns []string
	status   int
	reason   string
}{
	{
		patterns: []string{"PUT /sandboxes/{sandboxID}/network"},
		status:   http.StatusBadRequest,
		reason: "per-sandbox network rules are not supported: sandboxd's egress is an allow-list the node operator sets per pool and per tenant class; " +
			"choose the lane at create with allowInternetAccess (false is the isolated lane, with no egress)",
	},
	{
		patterns: []string{"GET /sandboxes/{sandboxID}/logs", "GET /v2/sandboxes/{sandboxID}/logs"},
		status:   http.StatusNotImplemented,
		reason:   "sandbox logs are not available: sandboxd keeps no per-sandbox log the API can read; a command's output comes back from commands.run",
	},
	{
		patterns: []string{"GET /secrets", "POST /secrets", "GET /secrets/{secretID}", "POST /secrets/{secretID}", "DELETE /secrets/{secretID}"},
		status:   http.StatusNotImplemented,
		reason:   "secrets are not supported: this server keeps no secret store; credentials a sandbox's egress needs are set by the node operator per tenant class",
	},
	{
		patterns: []string{"GET /teams", "GET /teams/{teamID}/metrics", "GET /teams/{teamID}/metrics/max"},
		status:   http.StatusNotImplemented,
		reason:   "teams are not supported: each API key belongs to one namespace, which is the whole of what this server knows of its owner",
	},
	{
		patterns: []string{"POST /volumes", "DELETE /volumes/{volumeID}"},
		status:   http.StatusBadRequest,
		reason:   "volumes cannot be created or deleted through the API: sandboxd's volumes are a catalog the node operator configures on each node; Volume.list shows it",
	},
	{
		patterns: []string{"GET /volumes/{volumeID}"},
		status:   http.StatusNotImplemented,
		reason: "a volume's contents are not served through the API: mount it with volumeMounts at create and read or write it inside the sandbox; " +
			"Volume.list shows the catalog",
	},
}

// unsupportedRoutes answers every operation of unsupported with its
// reason. They are keyed, so an unauthenticated caller still gets 401.
func (s *Server) unsupportedRoutes() []route {
	var rs []route
	for _, u := range unsupported {
		answer := func(w http.ResponseWriter, _ *http.Request, _ caller) { writeError(w, u.status, u.reason) }
		for _, p := range u.patterns {
			rs = append(rs, s.keyed(p, answer))
		}
	}
	return rs
}
