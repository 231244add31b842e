// Package envdproxytest is the data plane's auth matrix: each way a
// request can name a sandbox (the {port}-{id}.{domain} host, the
// E2b-Sandbox-Id/E2b-Sandbox-Port headers), on envd's port and another
// guest port, for a sandbox and for an id that names nothing, with every
// credential a caller might hold. src/envdproxy runs it over the proxy
// alone and src/cmd/sandbox-e2b/app over the assembled sandbox-e2b process.
package envdproxytest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Plane is a data plane under test and the sandbox it addresses.
type Plane struct {
	// URL is the proxy's base URL; the matrix sets Host itself.
	URL    string
	Client *http.Client
	Domain string
	// Sandbox is the sandbox addressed, in either spelling, with its
	// envd access token and its claim token (sandboxd's own).
	Sandbox     string
	AccessToken string
	ClaimToken  string
	// OtherAccessToken is another live sandbox's valid access token.
	OtherAccessToken string
	// RootToken is the sandboxd nodes' root token.
	RootToken string
	// APIKey is a control-plane key, which is no data-plane credential.
	APIKey string
	// Ports are the guest ports addressed.
	Ports []Port
}

// Port is a guest port, a path on it, and what its guest answers the
// sandbox's own token with.
type Port struct {
	Port int
	Path string
	Want int
}

// Counts are the matrix's totals.
type Counts struct {
	Modes, Ports, IDs, Credentials int
	// Cells is every request whose answer was checked.
	Cells int
	// Unexpected counts cells that broke their rule.
	Unexpected int
}

// How a credential is expected to fare.
type outcome int

const (
	// missing: no X-Access-Token at all, refused before any lookup.
	missing outcome = iota
	// wrong: an X-Access-Token that does not derive from the sandbox's
	// claim token.
	wrong
	// opens: the sandbox's own access token.
	opens
)

type credential struct {
	name          string
	header, value string
	outcome       outcome
	// onEnvd, when set, is the outcome on envd's port instead: the
	// traffic token opens a sandbox's other ports, never envd.
	onEnvd *outcome
}

// outcomeOn is how c fares on port.
func (c credential) outcomeOn(port int) outcome {
	if c.onEnvd != nil && port == sandboxd.EnvdPort {
		return *c.onEnvd
	}
	return c.outcome
}

func (p Plane) credentials() []credential {
	return []credential{
		{name: "no credential", outcome: missing},
		{name: "a wrong token", header: "X-Access-Token", value: strings.Repeat("0f", 32), outcome: wrong},
		{name: "another sandbox's access token", header: "X-Access-Token", value: p.OtherAccessToken, outcome: wrong},
		{name: "the claim token", header: "X-Access-Token", value: p.ClaimToken, outcome: wrong},
		{name: "the node root token", header: "X-Access-Token", value: p.RootToken, outcome: wrong},
		{name: "the node root token as Bearer", header: "Authorization", value: "Bearer " + p.RootToken, outcome: missing},
		{name: "an API key as X-API-KEY", header: "X-API-KEY", value: p.APIKey, outcome: missing},
		{name: "the sandbox's access token", header: "X-Access-Token", value: p.AccessToken, outcome: opens},
		// e2b's traffic token, derived from the access token: it opens the
		// sandbox's other ports (@e2b/code-interpreter's contexts send only
		// it) and is no credential at all on envd's.
		{name: "the sandbox's traffic token", header: "E2B-Traffic-Access-Token", value: envdtoken.Traffic(p.AccessToken), outcome: opens, onEnvd: ptr(missing)},
		{name: "another sandbox's traffic token", header: "E2B-Traffic-Access-Token", value: envdtoken.Traffic(p.OtherAccessToken), outcome: wrong, onEnvd: ptr(missing)},
		{name: "the access token as the traffic token", header: "E2B-Traffic-Access-Token", value: p.AccessToken, outcome: wrong, onEnvd: ptr(missing)},
	}
}

// mode is one way of naming the sandbox and port.
type mode struct {
	name string
	// address sets the request's Host and headers for id and port.
	address func(r *http.Request, id string, port int)
}

func (p Plane) modes() []mode {
	return []mode{
		{name: "host", address: func(r *http.Request, id string, port int) {
			dns, _ := sandbox.DNSID(id)
			r.Host = strconv.Itoa(port) + "-" + dns + "." + p.Domain
		}},
		{name: "headers", address: func(r *http.Request, id string, port int) {
			// The shared host names no sandbox: only the headers do.
			r.Host = "sandbox-proxy.internal"
			r.Header.Set("E2b-Sandbox-Id", id)
			r.Header.Set("E2b-Sandbox-Port", strconv.Itoa(port))
		}},
	}
}

type answer struct {
	status int
	body   []byte
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, bytes.TrimSpace(a.body)) }

func (p Plane) send(t *testing.T, m mode, id string, port Port, c credential) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+port.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.address(req, id, port.Port)
	if c.header != "" {
		req.Header.Set(c.header, c.value)
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", req.Host, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, body: raw}
}

// Run drives the matrix. A request without X-Access-Token is 401 before
// the id is looked at, so the known and the unknown id answer alike; a
// token that does not derive from the sandbox's claim token is 401 for a
// sandbox that exists and 502 for an id that names nothing, as the proxy
// documents; only the sandbox's own token reaches its guest.
func Run(t *testing.T, p Plane) Counts {
	t.Helper()
	creds, modes := p.credentials(), p.modes()
	n := Counts{Modes: len(modes), Ports: len(p.Ports), IDs: 2, Credentials: len(creds)}
	fail := func(format string, args ...any) {
		t.Helper()
		n.Unexpected++
		t.Errorf(format, args...)
	}
	known, ok := sandbox.CanonicalID(p.Sandbox)
	if !ok {
		t.Fatalf("%q is not a sandbox id", p.Sandbox)
	}
	unknown := unknownLike(known)
	// Every refusal of a kind must be byte-identical wherever it is
	// given, so no answer tells one sandbox, port or spelling from
	// another.
	refusals := map[string]answer{}
	same := func(kind, cell string, a answer) {
		t.Helper()
		if first, ok := refusals[kind]; !ok {
			refusals[kind] = a
		} else if !bytes.Equal(first.body, a.body) {
			fail("%s = %s, not the %s answered elsewhere: %s", cell, a, kind, first)
		}
	}
	for _, m := range modes {
		for _, port := range p.Ports {
			for _, c := range creds {
				cell := func(id string) string {
					return fmt.Sprintf("GET %s on port %d of %s by %s, with %s", port.Path, port.Port, id, m.name, c.name)
				}
				mine, none := p.send(t, m, known, port, c), p.send(t, m, unknown, port, c)
				n.Cells += 2
				// The claim token never leaves the proxy: no answer to a
				// caller that did not send it carries it.
				for _, a := range []answer{mine, none} {
					if p.ClaimToken != "" && !strings.Contains(c.value, p.ClaimToken) && bytes.Contains(a.body, []byte(p.ClaimToken)) {
						fail("%s: the answer carries the claim token", cell(known))
					}
				}
				switch c.outcomeOn(port.Port) {
				case missing:
					if mine.status != http.StatusUnauthorized || !bytes.Equal(mine.body, none.body) {
						fail("%s = %s; for an unknown id %s: want the same 401", cell(known), mine, none)
					}
					same("missing-token 401", cell(known), mine)
				case wrong, opens:
					if c.outcomeOn(port.Port) == opens {
						if mine.status != port.Want {
							fail("%s = %s, want %d from the guest", cell(known), mine, port.Want)
						}
					} else {
						// A wrong token must not tell an existing
						// sandbox from an id that names nothing.
						if mine.status != http.StatusBadGateway || !bytes.Equal(mine.body, none.body) {
							fail("%s = %s; for an unknown id %s: want the same 502", cell(known), mine, none)
						}
						same("unknown-id 502", cell(known), mine)
					}
					if none.status != http.StatusBadGateway {
						fail("%s = %s, want 502", cell(unknown), none)
					}
					same("unknown-id 502", cell(unknown), none)
				}
			}
		}
	}
	return n
}

func ptr(o outcome) *outcome { return &o }

// unknownLike is an id of the same shape as id that names nothing.
func unknownLike(id string) string {
	body := []byte(id[len(sandbox.IDPrefix):])
	for i, c := range body {
		switch {
		case c >= 'a' && c <= 'z':
			body[i] = 'a'
		case c >= '0' && c <= '9':
			body[i] = '2'
		}
	}
	return sandbox.IDPrefix + string(body)
}
