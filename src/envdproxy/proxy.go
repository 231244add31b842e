package envdproxy

import (
	"context"
	"errors"
	"net/http"
	"path"
	"sync"

	"golang.org/x/time/rate"

	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// EnvdPort is envd's guest port, the only one that takes signed file URLs
// and the one whose internal endpoints are refused.
const EnvdPort = sandboxd.EnvdPort

// internalPaths are the operations envd's spec marks x-internal. They
// reconfigure or freeze the guest and belong to the control plane, never to
// a data-plane client.
var internalPaths = map[string]bool{
	"/init": true, "/freeze": true, "/unfreeze": true,
	"/fsfreeze": true, "/fsthaw": true, "/collapse": true,
}

// Proxy is the data-plane handler. It is safe for concurrent use.
type Proxy struct {
	cfg    Config
	cache  *ownerCache
	flight flight
	budget *rate.Limiter
	nodes  sync.Map // node address → *sandboxd.Client
	fwd    *forwarder
	// uploads counts envd file uploads in flight per sandbox.
	uploads *uploadSlots
}

// New validates cfg and builds the proxy.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	return &Proxy{
		cfg:     cfg,
		cache:   newOwnerCache(cfg.CacheTTL),
		budget:  rate.NewLimiter(rate.Limit(cfg.LookupRate), cfg.LookupBurst),
		fwd:     newForwarder(cfg.GuestHTTP2, cfg.Logger),
		uploads: newUploadSlots(cfg.MaxConcurrentUploads),
	}, nil
}

// ServeHTTP places, authorizes and relays one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Bound the body before anything reads it: a stalled body then ends
	// the relay, and with it the node's and the guest's side.
	r = serve.BoundBody(w, r, serve.BodyLimits{Idle: p.cfg.BodyIdleTimeout, Total: p.cfg.BodyTimeout})
	start := p.cfg.Clock.Now()
	line := accessLine{method: r.Method, path: r.URL.Path, proto: r.Proto}
	rec := &recorder{Recorder: serve.Recorder{ResponseWriter: w}, line: &line}
	defer func() {
		if !line.probe {
			p.cfg.Observer.ObserveRequest(rec.status())
		}
		p.logAccess(&line, rec, start)
	}()
	p.serve(rec, r, &line)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, line *accessLine) {
	t, err := Route(r.Header, r.Host, p.cfg.Domain)
	if err != nil {
		if errors.Is(err, errNotSandboxHost) && r.URL.Path == "/healthz" &&
			(r.Method == http.MethodGet || r.Method == http.MethodHead) {
			line.probe = true
			p.healthz(w)
			return
		}
		line.reason = err.Error()
		reply(w, http.StatusBadRequest, err.Error())
		return
	}
	line.sandbox, line.port = t.ID, t.Port
	if t.Port == EnvdPort && internalPaths[cleanPath(r.URL.Path)] {
		reply(w, http.StatusNotFound, "not found")
		return
	}

	presented := r.Header.Get(HeaderAccessToken)
	// On a port other than envd's, the traffic token stands in for the
	// access token: @e2b/code-interpreter sends only it on its context
	// calls. envd itself takes nothing but the access token.
	traffic := ""
	if presented == "" && t.Port != EnvdPort {
		traffic = r.Header.Get(HeaderTrafficToken)
	}
	var relayToken string
	var o owner
	if presented == "" && traffic == "" {
		// Only a signed file URL travels without the header: a browser
		// or curl fetches it. envd verifies the signature; the proxy only
		// places the sandbox and relays with the passive fleet token.
		if !isSignedFileURL(r) || t.Port != EnvdPort {
			line.reason = "no access token"
			reply(w, http.StatusUnauthorized, "missing X-Access-Token")
			return
		}
		line.auth = "signed-url"
		if o, err = p.locate(r.Context(), t.ID, false); err != nil {
			p.unavailable(w, line, err)
			return
		}
		relayToken = p.cfg.Token
	} else {
		line.auth = "token"
		if o, err = p.locate(r.Context(), t.ID, true); err != nil {
			p.unavailable(w, line, err)
			return
		}
		matches := envdtoken.Equal(presented, o.derived)
		if presented == "" {
			line.auth = "traffic-token"
			matches = envdtoken.Equal(traffic, envdtoken.Traffic(o.derived))
		}
		if !matches {
			// The same answer as an id that names nothing: a 401 here
			// would tell a caller holding no token which ids exist.
			line.reason = "access token does not match"
			reply(w, http.StatusBadGateway, msgUnavailable)
			return
		}
		// The sandbox's own token is sandboxd's active path, which wakes
		// a paused sandbox: only for one created with autoResume. Any
		// other goes through the fleet token's passive path, which a
		// paused sandbox refuses, so it stays paused until connect.
		relayToken = p.cfg.Token
		if o.wakes {
			relayToken = o.claim
		}
	}

	var uploadLimit int64
	if isUpload(r, t) {
		release, ok := p.admitUpload(w, r, t, line)
		if !ok {
			return
		}
		defer release()
		uploadLimit = max(p.cfg.MaxUploadBytes, 0)
	}

	node, err := p.node(o.addr)
	if err != nil {
		p.unavailable(w, line, err)
		return
	}
	conn, err := p.dialRelay(r.Context(), node.As(relayToken), t)
	if err != nil {
		p.relayRefused(w, line, t.ID, o, err)
		return
	}
	// forward closes the relay before it returns.
	defer p.cfg.Observer.ObserveRelayClosed()
	p.fwd.forward(w, r, conn, uploadLimit)
}

// relayRefused maps a refused relay. The node's 401/403 is the proxy's
// 401; everything else is the 502 of an unreachable sandbox, and a 404
// for a cached claim token also drops the cache entry (the sandbox is
// gone, or the entry was wrong).
func (p *Proxy) relayRefused(w http.ResponseWriter, line *accessLine, id string, o owner, err error) {
	switch status := sandboxd.StatusOf(err); {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		line.reason = err.Error()
		reply(w, http.StatusUnauthorized, "the sandbox refused the connection")
		return
	case status == http.StatusNotFound:
		p.cache.drop(id, o)
	case (status == http.StatusConflict || status == http.StatusBadGateway) && isPausedMessage(err):
		// sandboxd answers a passive (fleet-token) relay into a paused
		// sandbox 409; older nodes answered 502 "sandbox is paused".
		line.reason = err.Error()
		reply(w, http.StatusBadGateway, msgPaused)
		return
	}
	p.unavailable(w, line, err)
}

func (p *Proxy) unavailable(w http.ResponseWriter, line *accessLine, err error) {
	line.reason = err.Error()
	if errors.Is(err, errNoClaim) {
		p.cfg.Logger.Warn("cannot verify access tokens: a node answered a sandbox read without its token; --sandboxd-token must be the nodes' root api_token")
	}
	if errors.Is(err, errCallerGone) || errors.Is(err, context.Canceled) {
		line.reason = "client went away"
	}
	reply(w, http.StatusBadGateway, msgUnavailable)
}

func (p *Proxy) healthz(w http.ResponseWriter) {
	if p.cfg.Ready != nil && !p.cfg.Ready() {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready\n"))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// isSignedFileURL is the SDK's downloadUrl/uploadUrl shape: /files with a
// signature in the query.
func isSignedFileURL(r *http.Request) bool {
	return cleanPath(r.URL.Path) == "/files" && r.URL.Query().Has("signature")
}

// cleanPath is the path a guest router would match, so "/init/" or
// "//init" cannot slip past the internal-path check.
func cleanPath(p string) string {
	return path.Clean("/" + p)
}
