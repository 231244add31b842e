package envdproxy

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

type noLocator struct{}

func (noLocator) Owner(string) (string, bool) { return "", false }
func (noLocator) Nodes() []string             { return nil }

// TestRelayRefusalMapping covers the node answers the simulator cannot be
// made to give with a well-configured proxy (a node that refuses the
// relay's credentials outright), next to the ones it does give.
func TestRelayRefusalMapping(t *testing.T) {
	p, err := New(Config{Locator: noLocator{}, Domain: "d.test", Secret: []byte("s"), Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	o := owner{addr: "10.0.0.9:7777", claim: "c"}
	cases := []struct {
		err     error
		status  int
		message string
		dropped bool
	}{
		{&sandboxd.APIError{Status: 401, Message: "unauthorized", Op: "relay"}, 401, "refused", false},
		{&sandboxd.APIError{Status: 403, Message: "forbidden", Op: "relay"}, 401, "refused", false},
		{&sandboxd.APIError{Status: 404, Message: "sandbox not found", Op: "relay"}, 502, msgUnavailable, true},
		{&sandboxd.APIError{Status: 502, Message: "sandbox is paused", Op: "relay"}, 502, msgPaused, false},
		{&sandboxd.APIError{Status: 502, Message: "guest unreachable", Op: "relay"}, 502, msgUnavailable, false},
		{&sandboxd.APIError{Status: 426, Message: "Upgrade: tcp required", Op: "relay"}, 502, msgUnavailable, false},
		{fmt.Errorf("dial 10.0.0.9:7777: %w", errors.New("connection refused")), 502, msgUnavailable, false},
	}
	for _, c := range cases {
		now := time.Now()
		p.cache.put("sb_x", o, now)
		rec := httptest.NewRecorder()
		p.relayRefused(rec, &accessLine{}, "sb_x", o, c.err)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.message) {
			t.Errorf("%v: %d %s, want %d %q", c.err, rec.Code, rec.Body, c.status, c.message)
		}
		if strings.Contains(rec.Body.String(), "10.0.0.9") {
			t.Errorf("%v: reply names the node: %s", c.err, rec.Body)
		}
		_, cached := p.cache.get("sb_x", now)
		if cached == c.dropped {
			t.Errorf("%v: cache entry kept=%v, want dropped=%v", c.err, cached, c.dropped)
		}
	}
}

func TestOwnerCacheSweepsExpiredEntries(t *testing.T) {
	c := newOwnerCache(time.Minute)
	t0 := time.Unix(0, 0)
	for i := range minSweep - 1 {
		c.put(fmt.Sprint("old", i), owner{addr: "a"}, t0)
	}
	c.put("fresh", owner{addr: "b"}, t0.Add(2*time.Minute))
	if len(c.entries) != 1 {
		t.Fatalf("after the sweep %d entries remain, want 1", len(c.entries))
	}
	if _, ok := c.get("fresh", t0.Add(2*time.Minute+59*time.Second)); !ok {
		t.Fatal("fresh entry lost")
	}
	if _, ok := c.get("fresh", t0.Add(3*time.Minute)); ok {
		t.Fatal("entry outlived its minute")
	}
}
