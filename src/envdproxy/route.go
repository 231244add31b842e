package envdproxy

import (
	"errors"
	"net/http"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Request headers the proxy reads. The SDK sends the two E2b-Sandbox-*
// headers when every sandbox shares one host (E2B_SANDBOX_URL).
const (
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	HeaderAccessToken = "X-Access-Token"
	// HeaderTrafficToken is e2b's traffic access token, which the SDKs
	// send instead of the access token on some calls to a sandbox's other
	// ports (envdtoken.Traffic).
	HeaderTrafficToken = "E2b-Traffic-Access-Token"
	// HeaderAPIKey is the e2b control-plane key. It never belongs to a
	// guest, so the proxy strips it.
	HeaderAPIKey = "X-Api-Key"
)

// Target is the sandbox and guest port a request is for.
type Target struct {
	// ID is the sandboxd spelling ("sb_…"), whichever spelling the
	// request used.
	ID   string
	Port int
}

var (
	// errNotSandboxHost means the request names no sandbox at all: no
	// routing headers and a host outside the domain. Only such a request
	// may be the proxy's own /healthz.
	errNotSandboxHost = errors.New("the host names no sandbox and no E2b-Sandbox-Id header is set")
	errBadPort        = errors.New("port must be 1-65535")
	errBadID          = errors.New("invalid sandbox id")
	errBadHost        = errors.New("host does not name a sandbox as {port}-{sandboxID}.{domain}")
	errHalfHeaders    = errors.New("E2b-Sandbox-Id and E2b-Sandbox-Port must be set together")
	errRepeatedHeader = errors.New("repeated E2b-Sandbox-Id or E2b-Sandbox-Port header")
)

// Route places a request: by the E2b-Sandbox-Id and E2b-Sandbox-Port
// headers when they are present (they win over the host), else by a host
// of the form {port}-{sandboxID}.{domain}. domain must already be
// normalized (NormalizeDomain).
func Route(h http.Header, host, domain string) (Target, error) {
	ids, ports := h.Values(HeaderSandboxID), h.Values(HeaderSandboxPort)
	if len(ids) > 1 || len(ports) > 1 {
		return Target{}, errRepeatedHeader
	}
	if len(ids) == 1 || len(ports) == 1 {
		if len(ids) != 1 || len(ports) != 1 {
			return Target{}, errHalfHeaders
		}
		return ParseHeaders(ids[0], ports[0])
	}
	return ParseHost(host, domain)
}

// ParseHeaders reads the E2b-Sandbox-Id and E2b-Sandbox-Port values.
func ParseHeaders(id, port string) (Target, error) {
	p, err := parsePort(strings.TrimSpace(port))
	if err != nil {
		return Target{}, err
	}
	canon, ok := sandbox.CanonicalID(strings.TrimSpace(id))
	if !ok {
		return Target{}, errBadID
	}
	return Target{ID: canon, Port: p}, nil
}

// ParseHost reads {port}-{sandboxID}.{domain}, optionally followed by
// :port. The domain matches case-insensitively and a trailing root dot is
// ignored. A sandbox id carries hyphens of its own, so only the first
// hyphen separates the port. Host names are case-insensitive, so the id is
// read in lower case, which is how sandboxd spells ids.
func ParseHost(host, domain string) (Target, error) {
	if strings.HasPrefix(host, "[") {
		return Target{}, errNotSandboxHost // an IPv6 literal
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	if domain == "" || len(host) <= len(domain)+1 {
		return Target{}, errNotSandboxHost
	}
	cut := len(host) - len(domain)
	if host[cut-1] != '.' || !strings.EqualFold(host[cut:], domain) {
		return Target{}, errNotSandboxHost
	}
	label := host[:cut-1]
	if strings.IndexByte(label, '.') >= 0 {
		return Target{}, errBadHost
	}
	portPart, idPart, ok := strings.Cut(label, "-")
	if !ok || portPart == "" {
		return Target{}, errBadHost
	}
	p, err := parsePort(portPart)
	if err != nil {
		return Target{}, err
	}
	canon, ok := sandbox.CanonicalID(strings.ToLower(idPart))
	if !ok {
		return Target{}, errBadID
	}
	return Target{ID: canon, Port: p}, nil
}

// parsePort accepts 1-65535 in plain decimal digits: no sign, no spaces.
func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, errBadPort
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errBadPort
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, errBadPort
	}
	return n, nil
}

// NormalizeDomain lower-cases the base domain and drops surrounding dots,
// and rejects one that could not be the parent of a host label.
func NormalizeDomain(domain string) (string, error) {
	d := strings.ToLower(strings.Trim(strings.TrimSpace(domain), "."))
	if d == "" {
		return "", errors.New("envdproxy: domain is required")
	}
	if strings.ContainsAny(d, ":/ \t[]@*") || strings.Contains(d, "..") {
		return "", errors.New("envdproxy: domain must be a bare DNS name such as sandbox.example.com")
	}
	return d, nil
}
