package e2b_test

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
)

// createBody is an isolated-lane create of the default alias.
const createBody = `{"templateID":"base","allow_internet_access":false}`

// fromSource returns a copy of e whose requests leave from the loopback
// address ip, so the surface sees another anonymous source. It skips the
// test where the host cannot bind that address.
func fromSource(t *testing.T, e *env, ip string) *env {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	probe, err := d.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Skipf("cannot connect from %s here: %v", ip, err)
	}
	probe.Close()
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	other := *e
	other.http = &http.Client{Transport: tr}
	return &other
}

// statuses fires n creates with key and counts the answers by status,
// checking every 429's e2b error body.
func statuses(t *testing.T, e *env, key string, n int) map[int]int {
	t.Helper()
	got := map[int]int{}
	for range n {
		r := e.do(t, http.MethodPost, "/v2/sandboxes", key, createBody)
		got[r.status]++
		if r.status == http.StatusTooManyRequests {
			r.errorMessage(t)
		}
	}
	return got
}

func TestCreateRateIsPerKey(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	e := newEnv(t, envOptions{config: func(c *e2b.Config) {
		c.Clock, c.CreateRate, c.CreateBurst, c.MaxSandboxes = clk, 1, 3, -1
	}})
	// The clock stands still: the burst is all there is.
	if got := statuses(t, e, keyA, 6); got[http.StatusCreated] != 3 || got[http.StatusTooManyRequests] != 3 {
		t.Fatalf("6 creates with a burst of 3 = %v, want 3 created and 3 refused", got)
	}
	r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, createBody)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" {
		t.Fatalf("create past the burst = %d (Retry-After %q), want 429 with Retry-After 1", r.status, r.header.Get("Retry-After"))
	}
	if msg := r.errorMessage(t); !strings.Contains(msg, "API key") {
		t.Errorf("429 message %q does not say what is limited", msg)
	}
	if n := e.live(t); n != 3 {
		t.Errorf("refused creates left %d claims, want the 3 admitted", n)
	}
	// Another key has a bucket of its own.
	if got := statuses(t, e, keyB, 1); got[http.StatusCreated] != 1 {
		t.Errorf("another key's first create = %v, want 201", got)
	}
	// One second refills one token.
	clk.SetTime(clk.Now().Add(time.Second))
	if got := statuses(t, e, keyA, 2); got[http.StatusCreated] != 1 || got[http.StatusTooManyRequests] != 1 {
		t.Errorf("2 creates one second later = %v, want 1 created and 1 refused", got)
	}
}

func TestCreateRateIsPerSourceWhenAnonymous(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	e := newEnv(t, envOptions{anon: true, config: func(c *e2b.Config) {
		c.Clock, c.CreateRate, c.CreateBurst, c.MaxSandboxes = clk, 1, 2, -1
	}})
	if got := statuses(t, e, "", 4); got[http.StatusCreated] != 2 || got[http.StatusTooManyRequests] != 2 {
		t.Fatalf("4 anonymous creates with a burst of 2 = %v, want 2 created and 2 refused", got)
	}
	r := e.do(t, http.MethodPost, "/v2/sandboxes", "", createBody)
	if msg := r.errorMessage(t); r.status != http.StatusTooManyRequests || !strings.Contains(msg, "source address") {
		t.Errorf("anonymous create past the burst = %d %q", r.status, msg)
	}
	// A forwarding header is no other source: nothing trusts it.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v2/sandboxes", strings.NewReader(createBody))
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("create with a forged X-Forwarded-For = %d, want 429", resp.StatusCode)
	}
	if got := statuses(t, fromSource(t, e, "127.0.0.2"), "", 1); got[http.StatusCreated] != 1 {
		t.Errorf("another source's first create = %v, want 201", got)
	}
}

func TestLiveSandboxCapComesFromTheFleet(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *e2b.Config) { c.CreateRate, c.MaxSandboxes = -1, 2 }})
	first := e.create(t, keyA, nil)
	e.create(t, keyA, nil)
	r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, createBody)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("create over the cap = %d %s, want 429", r.status, r.body)
	}
	if msg := r.errorMessage(t); !strings.Contains(msg, "2 concurrent sandboxes") {
		t.Errorf("429 message %q does not name the cap", msg)
	}
	// A kill frees a place at once: the count is the fleet's, not a
	// tally of creates.
	if r := e.do(t, http.MethodDelete, "/sandboxes/"+first.SandboxID, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("kill = %d %s", r.status, r.body)
	}
	e.create(t, keyA, nil)
	if n := e.live(t); n != 2 {
		t.Errorf("fleet holds %d claims, want 2", n)
	}

	// Concurrent creates cannot slip past the cap together.
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[int]int{}
	for range 6 {
		wg.Go(func() {
			r := e.do(t, http.MethodPost, "/v2/sandboxes", keyB, createBody)
			mu.Lock()
			got[r.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if got[http.StatusCreated] > 2 || got[http.StatusCreated]+got[http.StatusTooManyRequests] != 6 {
		t.Errorf("6 concurrent creates under a cap of 2 = %v, want at most 2 created and the rest 429", got)
	}
	if n := e.live(t); n > 4 {
		t.Errorf("fleet holds %d claims, want at most 4", n)
	}
}

func TestLiveSandboxCapIsPerSourceWhenAnonymous(t *testing.T) {
	e := newEnv(t, envOptions{anon: true, config: func(c *e2b.Config) { c.CreateRate, c.MaxSandboxes = -1, 1 }})
	sb := e.create(t, "", nil)
	r := e.do(t, http.MethodPost, "/v2/sandboxes", "", createBody)
	if msg := r.errorMessage(t); r.status != http.StatusTooManyRequests || !strings.Contains(msg, "source address") {
		t.Fatalf("anonymous create over the cap = %d %q", r.status, msg)
	}
	other := fromSource(t, e, "127.0.0.2")
	other.create(t, "", nil)
	if r := e.do(t, http.MethodDelete, "/sandboxes/"+sb.SandboxID, "", nil); r.status != http.StatusNoContent {
		t.Fatalf("kill = %d %s", r.status, r.body)
	}
	e.create(t, "", nil)
}
