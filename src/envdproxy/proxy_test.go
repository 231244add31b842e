package envdproxy_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// TestWhatCrossesToTheGuest checks, from what the echo guest received,
// which headers cross: the access token and the client's own headers do,
// the control-plane key and the claim token never do.
func TestWhatCrossesToTheGuest(t *testing.T) {
	e := newEnv(t, envOptions{})
	cl := e.claim(1, true)
	tok := accessToken(cl.Token)

	check := func(t *testing.T, hostName string, opts ...reqOpt) {
		opts = append(opts, withToken(tok), withHeader("X-API-KEY", "e2b_key"),
			withHeader("Authorization", "Basic dXNlcjo="), withHeader("X-Custom", "kept"))
		status, body, _ := e.do(http.MethodPut, hostName, "/some/path?a=1&b=two", strings.NewReader("payload"), opts...)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		doc := decodeEcho(t, body)
		if doc.Sandbox != cl.ID || doc.Port != echoPort {
			t.Fatalf("answered by %s:%d, want %s:%d", doc.Sandbox, doc.Port, cl.ID, echoPort)
		}
		if doc.Method != http.MethodPut || doc.Path != "/some/path" || doc.RawQuery != "a=1&b=two" || doc.Body != "payload" {
			t.Fatalf("request changed on the way: %+v", doc)
		}
		if doc.Host != hostName {
			t.Fatalf("guest saw host %q, want %q", doc.Host, hostName)
		}
		if got := doc.Headers["X-Access-Token"]; len(got) != 1 || got[0] != tok {
			t.Fatalf("X-Access-Token at the guest = %q, want the client's token unchanged", got)
		}
		if _, ok := doc.Headers["X-Api-Key"]; ok {
			t.Fatal("X-API-KEY reached the guest")
		}
		if got := doc.Headers["Authorization"]; len(got) != 1 || got[0] != "Basic dXNlcjo=" {
			t.Fatalf("Authorization at the guest = %q", got)
		}
		if got := doc.Headers["X-Custom"]; len(got) != 1 || got[0] != "kept" {
			t.Fatalf("X-Custom at the guest = %q", got)
		}
		if strings.Contains(string(body), cl.Token) {
			t.Fatal("the claim token reached the guest")
		}
	}
	t.Run("derived host", func(t *testing.T) { check(t, host(echoPort, cl.ID)) })
	t.Run("derived host with port and upper case", func(t *testing.T) {
		check(t, strings.ToUpper(host(echoPort, cl.ID))+":8443")
	})
	t.Run("headers, DNS spelling", func(t *testing.T) {
		check(t, "sandbox-proxy.internal", withHeader("E2b-Sandbox-Id", strings.Replace(cl.ID, "sb_", "sb-", 1)),
			withHeader("E2b-Sandbox-Port", "8080"))
	})
	t.Run("headers win over the host", func(t *testing.T) {
		other := e.claim(0, true)
		check(t, host(echoPort, other.ID), withHeader("E2b-Sandbox-Id", cl.ID), withHeader("E2b-Sandbox-Port", "8080"))
	})
}

// TestFailureTable drives every row of the failure table against the
// simulated fleet, and checks that no answer names a node.
func TestFailureTable(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 3})
	pub := e.claim(0, true)
	unpub := e.claim(1, false)
	paused := e.claim(2, true)
	if err := e.root(2).Hibernate(ctxT(t), paused.ID); err != nil {
		t.Fatal(err)
	}
	tok := accessToken(pub.Token)
	unknown := "sb_" + strings.Repeat("0", 20)
	sig := "/files?path=a.txt&signature=v1_abc"

	rows := []struct {
		name      string
		host      string
		path      string
		opts      []reqOpt
		want      int
		wantInMsg string
	}{
		{"host outside the domain", "example.org", "/", []reqOpt{withToken(tok)}, 400, ""},
		{"the bare domain", domain, "/", []reqOpt{withToken(tok)}, 400, ""},
		{"host under the domain, no port", "sb-0123." + domain, "/", []reqOpt{withToken(tok)}, 400, ""},
		{"port 0", host(0, pub.ID), "/", []reqOpt{withToken(tok)}, 400, "1-65535"},
		{"port 65536", "65536-" + strings.Replace(pub.ID, "_", "-", 1) + "." + domain, "/", []reqOpt{withToken(tok)}, 400, "1-65535"},
		{"header port 70000", "x", "/", []reqOpt{withToken(tok), withHeader("E2b-Sandbox-Id", pub.ID), withHeader("E2b-Sandbox-Port", "70000")}, 400, "1-65535"},
		{"not an id", "8080-xx-0123." + domain, "/", []reqOpt{withToken(tok)}, 400, ""},
		{"id header without port header", host(echoPort, pub.ID), "/", []reqOpt{withToken(tok), withHeader("E2b-Sandbox-Id", pub.ID)}, 400, ""},

		{"no access token", host(echoPort, pub.ID), "/", nil, 401, ""},
		{"wrong access token", host(echoPort, pub.ID), "/", []reqOpt{withToken(accessToken("not-the-claim"))}, 502, ""},
		{"wrong token, unpublished sandbox", host(echoPort, unpub.ID), "/", []reqOpt{withToken(tok)}, 502, ""},
		{"another sandbox's token", host(echoPort, pub.ID), "/", []reqOpt{withToken(accessToken(unpub.Token))}, 502, ""},
		{"signed URL off the envd port", host(echoPort, pub.ID), sig, nil, 401, ""},
		{"no token, /files without signature", host(envdproxy.EnvdPort, pub.ID), "/files?path=a.txt", nil, 401, ""},
		{"wrong token next to a signature", host(envdproxy.EnvdPort, pub.ID), sig, []reqOpt{withToken("00")}, 502, ""},

		{"/init", host(envdproxy.EnvdPort, pub.ID), "/init", []reqOpt{withToken(tok)}, 404, ""},
		{"/freeze without token", host(envdproxy.EnvdPort, pub.ID), "/freeze", nil, 404, ""},
		{"/unfreeze", host(envdproxy.EnvdPort, pub.ID), "/unfreeze", []reqOpt{withToken(tok)}, 404, ""},
		{"/fsfreeze/", host(envdproxy.EnvdPort, pub.ID), "/fsfreeze/", []reqOpt{withToken(tok)}, 404, ""},
		{"//fsthaw", host(envdproxy.EnvdPort, pub.ID), "//fsthaw", []reqOpt{withToken(tok)}, 404, ""},
		{"/%63ollapse", host(envdproxy.EnvdPort, pub.ID), "/%63ollapse", []reqOpt{withToken(tok)}, 404, ""},

		{"unknown id", host(echoPort, unknown), "/", []reqOpt{withToken(tok)}, 502, "sandbox unavailable"},
		{"unknown id, signed URL", host(envdproxy.EnvdPort, unknown), sig, nil, 502, "sandbox unavailable"},
		{"nothing listening", host(9, pub.ID), "/", []reqOpt{withToken(tok)}, 502, "sandbox unavailable"},
		{"paused, signed URL", host(envdproxy.EnvdPort, paused.ID), sig, nil, 502, "sandbox is paused"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			status, body, h := e.do(http.MethodGet, row.host, row.path, nil, row.opts...)
			if status != row.want {
				t.Fatalf("status %d, want %d (body %s)", status, row.want, body)
			}
			if !strings.Contains(string(body), row.wantInMsg) {
				t.Fatalf("body %s does not say %q", body, row.wantInMsg)
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			assertNamesNoNode(t, e, body)
		})
	}

	// A passive relay must not wake the sandbox.
	sb, err := e.root(2).Sandbox(ctxT(t), paused.ID)
	if err != nil || !sb.Hibernated {
		t.Fatalf("paused sandbox after a signed URL: hibernated=%v err=%v", sb.Hibernated, err)
	}
	// Nor does a request with the access token, unless the sandbox was
	// created with autoResume: it stays paused until connect.
	status, body, _ := e.do(http.MethodGet, host(echoPort, paused.ID), "/", nil, withToken(accessToken(paused.Token)))
	if status != http.StatusBadGateway || !strings.Contains(string(body), "sandbox is paused") {
		t.Fatalf("request with the token to a paused sandbox without autoResume: %d %s, want 502 sandbox is paused", status, body)
	}
	if sb, err := e.root(2).Sandbox(ctxT(t), paused.ID); err != nil || !sb.Hibernated {
		t.Fatalf("a paused sandbox without autoResume after a request with its token: hibernated=%v err=%v", sb.Hibernated, err)
	}
	// With autoResume the sandbox's own token is the relay's: it wakes.
	wakes, err := e.root(2).Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "default/wakes", NoRedirect: true,
		Metadata: map[string]string{sandbox.LabelAutoResume: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	e.loc.publish(wakes.ID, e.fleet.Node(2).Addr())
	if err := e.root(2).Hibernate(ctxT(t), wakes.ID); err != nil {
		t.Fatal(err)
	}
	status, body, _ = e.do(http.MethodGet, host(echoPort, wakes.ID), "/", nil, withToken(accessToken(wakes.Token)))
	if status != http.StatusOK {
		t.Fatalf("request with the token to a paused autoResume sandbox: %d %s", status, body)
	}

	t.Run("released while still published", func(t *testing.T) {
		gone := e.claim(0, true)
		gtok := accessToken(gone.Token)
		if s, b, _ := e.do(http.MethodGet, host(echoPort, gone.ID), "/", nil, withToken(gtok)); s != 200 {
			t.Fatalf("before release: %d %s", s, b)
		}
		if err := e.root(0).Release(ctxT(t), gone.ID); err != nil {
			t.Fatal(err)
		}
		status, body, _ := e.do(http.MethodGet, host(echoPort, gone.ID), "/", nil, withToken(gtok))
		if status != http.StatusBadGateway {
			t.Fatalf("after release: %d %s", status, body)
		}
	})

	t.Run("node unreachable", func(t *testing.T) {
		victim := e.claim(2, true)
		vtok := accessToken(victim.Token)
		if s, b, _ := e.do(http.MethodGet, host(echoPort, victim.ID), "/", nil, withToken(vtok)); s != 200 {
			t.Fatalf("before kill: %d %s", s, b)
		}
		if err := e.fleet.Kill(2); err != nil {
			t.Fatal(err)
		}
		status, body, _ := e.do(http.MethodGet, host(echoPort, victim.ID), "/", nil, withToken(vtok))
		if status != http.StatusBadGateway {
			t.Fatalf("after kill: %d %s", status, body)
		}
		assertNamesNoNode(t, e, body)
		// A dead node among those asked does not stop an unlisted id
		// from being found on a live one.
		late := e.claim(1, false)
		status, body, _ = e.do(http.MethodGet, host(echoPort, late.ID), "/", nil, withToken(accessToken(late.Token)))
		if status != http.StatusOK {
			t.Fatalf("unlisted sandbox with a dead node in the fleet: %d %s", status, body)
		}
	})
}

func assertNamesNoNode(t *testing.T, e *env, body []byte) {
	t.Helper()
	for _, n := range e.fleet.Nodes() {
		if strings.Contains(string(body), n.Addr()) {
			t.Fatalf("reply %s names node address %s", body, n.Addr())
		}
	}
	if strings.Contains(string(body), "sim-node") || strings.Contains(string(body), "127.0.0.1") {
		t.Fatalf("reply %s names a node", body)
	}
}

func TestHealthz(t *testing.T) {
	ready := false
	var mu sync.Mutex
	e := newEnv(t, envOptions{nodes: 1, tune: func(c *envdproxy.Config) {
		c.Ready = func() bool { mu.Lock(); defer mu.Unlock(); return ready }
	}})
	if s, _, _ := e.do(http.MethodGet, e.addr, "/healthz", nil); s != http.StatusServiceUnavailable {
		t.Fatalf("healthz before ready: %d", s)
	}
	mu.Lock()
	ready = true
	mu.Unlock()
	if s, b, _ := e.do(http.MethodGet, e.addr, "/healthz", nil); s != http.StatusOK {
		t.Fatalf("healthz: %d %s", s, b)
	}
	// On a sandbox host /healthz is the guest's path, not the proxy's.
	cl := e.claim(0, true)
	s, b, _ := e.do(http.MethodGet, host(echoPort, cl.ID), "/healthz", nil, withToken(accessToken(cl.Token)))
	if s != http.StatusOK || decodeEcho(t, b).Path != "/healthz" {
		t.Fatalf("guest /healthz: %d %s", s, b)
	}
}

// TestUnlistedIDBudget floods the proxy with ids no node holds and counts
// the lookups the nodes received: one per ask per node, and no more asks
// than the budget's burst while the clock stands still.
func TestUnlistedIDBudget(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 3})
	realA := e.claim(1, false)
	realB := e.claim(2, false)
	before := []int64{e.gets(0), e.gets(1), e.gets(2)}

	const flood = 600
	ids := make(chan string, flood)
	for range flood {
		b := make([]byte, 10)
		_, _ = rand.Read(b)
		ids <- "sb_" + hex.EncodeToString(b)
	}
	close(ids)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 16 {
		wg.Go(func() {
			for id := range ids {
				s, _, _ := e.do(http.MethodGet, host(echoPort, id), "/", nil, withToken(accessToken("x")))
				mu.Lock()
				statuses[s]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if statuses[http.StatusBadGateway] != flood {
		t.Fatalf("flood answers %v, want %d x 502", statuses, flood)
	}
	for i := range 3 {
		if got := e.gets(i) - before[i]; got != envdproxy.DefaultLookupBurst {
			t.Fatalf("node %d received %d lookups during the flood, want the burst %d", i, got, envdproxy.DefaultLookupBurst)
		}
	}

	// The budget is spent for everyone: a real sandbox the inventory does
	// not list answers 502 too, and costs the nodes nothing.
	mid := []int64{e.gets(0), e.gets(1), e.gets(2)}
	s, _, _ := e.do(http.MethodGet, host(echoPort, realA.ID), "/", nil, withToken(accessToken(realA.Token)))
	if s != http.StatusBadGateway {
		t.Fatalf("unlisted sandbox past the budget: %d, want 502", s)
	}
	// A published one is unaffected.
	e.loc.publish(realB.ID, e.fleet.Node(2).Addr())
	if s, b, _ := e.do(http.MethodGet, host(echoPort, realB.ID), "/", nil, withToken(accessToken(realB.Token))); s != 200 {
		t.Fatalf("published sandbox past the budget: %d %s", s, b)
	}
	if d := e.gets(1) - mid[1]; d != 0 {
		t.Fatalf("node 1 received %d lookups past the budget", d)
	}

	// 5 ms at 200/s refills exactly one ask. Concurrent requests for one
	// unlisted id share it.
	e.clock.Step(5 * time.Millisecond)
	mid = []int64{e.gets(0), e.gets(1), e.gets(2)}
	var okCount sync.WaitGroup
	results := make(chan int, 20)
	for range 20 {
		okCount.Go(func() {
			s, _, _ := e.do(http.MethodGet, host(echoPort, realA.ID), "/", nil, withToken(accessToken(realA.Token)))
			results <- s
		})
	}
	okCount.Wait()
	close(results)
	for s := range results {
		if s != http.StatusOK {
			t.Fatalf("a request for the resolved sandbox answered %d", s)
		}
	}
	if d := e.gets(1) - mid[1]; d != 1 {
		t.Fatalf("owner received %d lookups for 20 concurrent requests, want 1", d)
	}
	for _, i := range []int{0, 2} {
		if d := e.gets(i) - mid[i]; d > 1 {
			t.Fatalf("node %d received %d lookups for one ask", i, d)
		}
	}
}

// TestCacheExpiry checks that an owner and its derived token are read
// once a minute, on the injected clock.
func TestCacheExpiry(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2})
	pub := e.claim(0, true)
	unpub := e.claim(1, false)

	get := func(cl string, tok string) int {
		s, _, _ := e.do(http.MethodGet, host(echoPort, cl), "/", nil, withToken(tok))
		return s
	}
	base0, base1 := e.gets(0), e.gets(1)
	if s := get(pub.ID, accessToken(pub.Token)); s != 200 {
		t.Fatalf("first request %d", s)
	}
	if s := get(pub.ID, accessToken(pub.Token)); s != 200 {
		t.Fatalf("second request %d", s)
	}
	// A wrong token is refused from the cache, without a node read.
	if s := get(pub.ID, accessToken("wrong")); s != 502 {
		t.Fatalf("wrong token %d", s)
	}
	e.clock.Step(59 * time.Second)
	if s := get(pub.ID, accessToken(pub.Token)); s != 200 {
		t.Fatalf("at 59s %d", s)
	}
	if d := e.gets(0) - base0; d != 1 {
		t.Fatalf("published owner read %d times within the minute, want 1", d)
	}
	e.clock.Step(2 * time.Second)
	if s := get(pub.ID, accessToken(pub.Token)); s != 200 {
		t.Fatalf("at 61s %d", s)
	}
	if d := e.gets(0) - base0; d != 2 {
		t.Fatalf("published owner read %d times after the minute, want 2", d)
	}
	if d := e.gets(1) - base1; d != 0 {
		t.Fatalf("another node read %d times for a published sandbox, want 0", d)
	}

	// An owner found by asking the nodes is kept a minute as well.
	base0, base1 = e.gets(0), e.gets(1)
	for range 3 {
		if s := get(unpub.ID, accessToken(unpub.Token)); s != 200 {
			t.Fatalf("unlisted sandbox: %d", s)
		}
	}
	if d := e.gets(1) - base1; d != 1 {
		t.Fatalf("unlisted owner asked %d times within the minute, want 1", d)
	}
	e.clock.Step(61 * time.Second)
	if s := get(unpub.ID, accessToken(unpub.Token)); s != 200 {
		t.Fatalf("unlisted sandbox after a minute: %d", s)
	}
	if d := e.gets(1) - base1; d != 2 {
		t.Fatalf("unlisted owner asked %d times after the minute, want 2", d)
	}
	if d := e.gets(0) - base0; d > 2 {
		t.Fatalf("the other node was asked %d times for two asks", d)
	}
}

func TestNewValidates(t *testing.T) {
	good := envdproxy.Config{Locator: &mapLocator{}, Domain: "Sandbox.Example.com.", Secret: []byte("s"), Token: "t"}
	if _, err := envdproxy.New(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mut := range map[string]func(*envdproxy.Config){
		"no locator":   func(c *envdproxy.Config) { c.Locator = nil },
		"no domain":    func(c *envdproxy.Config) { c.Domain = "" },
		"url domain":   func(c *envdproxy.Config) { c.Domain = "https://x.example.com" },
		"no secret":    func(c *envdproxy.Config) { c.Secret = nil },
		"no token":     func(c *envdproxy.Config) { c.Token = "" },
		"negative ttl": func(c *envdproxy.Config) { c.CacheTTL = -time.Second },
	} {
		c := good
		mut(&c)
		if _, err := envdproxy.New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
