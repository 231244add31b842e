package e2b_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// replica is a second surface over the same simulated fleet, with a fleet
// core and a view of its own, as another sandbox-apiserver or sandbox-e2b
// replica has; it shares nothing with e's surface but the nodes.
func (e *env) replica(t *testing.T, adjust func(*e2b.Config)) *env {
	t.Helper()
	keys, err := e2b.ParseAPIKeys([]byte(keyA+" team-a\n"+keyB+" team-b\n"+keyDef+"\n"), "default")
	if err != nil {
		t.Fatal(err)
	}
	aliases, err := e2b.ParseAliases([]byte("base " + image + "\nbig " + image + " medium\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := e2b.Config{Namespace: "default", Domain: domain, Aliases: aliases, EnvdSecret: envdSecret, Keys: keys}
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := e2b.NewServer(cfg, newFleet(t, e.fleet), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &env{fleet: e.fleet, srv: srv, url: hs.URL, http: e.http}
}

type detail struct {
	listed
	AllowInternetAccess *bool `json:"allowInternetAccess"`
}

// What a create records is the same through every replica, at once, and
// after the replica that took it is gone: metadata (and its filter), the
// alias, the internet choice.
func TestCreateStateIsSeenByEveryReplica(t *testing.T) {
	a := newEnv(t, envOptions{})
	b := a.replica(t, nil)
	c := a.create(t, keyA, map[string]any{"templateID": "big", "metadata": map[string]string{"owner": "ana", "run": "42"}})

	check := func(e *env, who string) {
		t.Helper()
		var d detail
		r := e.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, keyA, nil)
		if r.status != http.StatusOK {
			t.Fatalf("%s: get = %d", who, r.status)
		}
		r.decode(t, &d)
		if d.Metadata["owner"] != "ana" || d.Metadata["run"] != "42" || len(d.Metadata) != 2 || d.Alias != "big" ||
			d.AllowInternetAccess == nil || *d.AllowInternetAccess {
			t.Errorf("%s: get = %+v (internet %v), want the create's metadata, alias big and no internet", who, d.listed, d.AllowInternetAccess)
		}
		var found []listed
		e.do(t, http.MethodGet, "/v2/sandboxes?metadata=owner%3Dana", keyA, nil).decode(t, &found)
		if len(found) != 1 || found[0].SandboxID != c.SandboxID {
			t.Errorf("%s: metadata filter found %+v", who, found)
		}
		e.do(t, http.MethodGet, "/v2/sandboxes?metadata=owner%3Dbob", keyA, nil).decode(t, &found)
		if len(found) != 0 {
			t.Errorf("%s: a filter on other metadata found %+v", who, found)
		}
	}
	check(a, "the creating replica")
	check(b, "another replica")
	// The creating replica goes; a new one (a restart) knows it all.
	a.srv.Close()
	check(a.replica(t, nil), "a restarted replica")
	// Another namespace sees nothing of it.
	if r := b.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, keyB, nil); r.status != http.StatusNotFound {
		t.Errorf("another namespace's get = %d, want 404", r.status)
	}
}

// onTimeout "pause" is the node's own doing: the claim carries sandboxd's
// on_expire "archive", so the sandbox is archived at its timeout with no
// replica up, any replica shows it paused, and connect through any replica
// wakes it with a fresh lease.
func TestPauseAtTimeoutNeedsNoReplica(t *testing.T) {
	a := newEnv(t, envOptions{})
	b := a.replica(t, nil)
	c := a.create(t, keyA, map[string]any{"timeout": 2, "autoPause": true, "allow_internet_access": false})
	id, _ := sandbox.CanonicalID(c.SandboxID)
	_, addr := a.claimToken(t, id)
	node, err := sandboxd.New(addr, sandboxd.WithToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	row, err := node.Sandbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if row.OnExpire != sandboxd.ExpireArchive {
		t.Fatalf("the claim's on_expire is %q, want %q", row.OnExpire, sandboxd.ExpireArchive)
	}
	a.srv.Close()

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(30 * time.Second)
	for {
		row, err := node.Sandbox(context.Background(), id)
		if err != nil {
			t.Fatalf("the sandbox is gone from its node at its timeout (%v): it should have been archived", err)
		}
		if row.Archived {
			break
		}
		select {
		case <-tick.C:
		case <-giveUp:
			t.Fatalf("the node did not archive the sandbox at its timeout: %+v", row)
		}
	}
	var got detail
	b.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, keyA, nil).decode(t, &got)
	if got.State != "paused" {
		t.Fatalf("an archived sandbox shows as %q through another replica, want paused", got.State)
	}
	r := b.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/connect", keyA, map[string]any{"timeout": 300})
	if r.status != http.StatusCreated {
		t.Fatalf("connect to the archived sandbox = %d %s, want 201", r.status, r.body)
	}
	b.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, keyA, nil).decode(t, &got)
	if got.State != "running" || time.Until(got.EndAt) < 4*time.Minute {
		t.Fatalf("after connect: %q until %s, want running for the connect's 300 s", got.State, got.EndAt)
	}
}

// sandboxd's bounds on claim labels are the bounds of e2b metadata here,
// checked before anything is claimed.
func TestMetadataBounds(t *testing.T) {
	e := newEnv(t, envOptions{})
	many := map[string]string{}
	// 15 of the caller's and the surface's alias and internet labels: 17.
	for i := range 15 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for name, md := range map[string]map[string]string{
		"13 pairs":           many,
		"a key with =":       {"a=b": "v"},
		"a key with &":       {"a&b": "v"},
		"a 127-byte key":     {strings.Repeat("k", 127): "v"},
		"a 513-byte value":   {"k": strings.Repeat("v", 513)},
		"a control char":     {"k": "a\x01b"},
		"over 4 KiB as JSON": {"a": strings.Repeat(`"`, 500), "b": strings.Repeat(`"`, 500), "c": strings.Repeat(`"`, 500), "d": strings.Repeat(`"`, 500), "e": strings.Repeat(`"`, 500)},
	} {
		r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": "base", "allow_internet_access": false, "metadata": md})
		if r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(t), "metadata") {
			t.Errorf("%s: create = %d %s, want 400 naming metadata", name, r.status, r.body)
		}
	}
	if n := e.live(t); n != 0 {
		t.Fatalf("refused creates claimed %d sandboxes", n)
	}
	e.create(t, keyA, map[string]any{"metadata": map[string]string{strings.Repeat("k", 126): strings.Repeat("v", 512)}})
}

// A create hands out e2b's traffic access token, derived from the envd
// access token, which @e2b/code-interpreter sends on its context calls and
// the data plane checks; a connect through another replica hands out the
// same one.
func TestTrafficAccessToken(t *testing.T) {
	a := newEnv(t, envOptions{})
	c := a.create(t, keyA, nil)
	if c.Traffic == nil || *c.Traffic != envdtoken.Traffic(c.EnvdAccessToken) {
		t.Fatalf("trafficAccessToken = %v, want envdtoken.Traffic of the access token", c.Traffic)
	}
	var again created
	a.replica(t, nil).do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/connect", keyA, map[string]any{}).decode(t, &again)
	if again.Traffic == nil || *again.Traffic != *c.Traffic {
		t.Fatalf("connect through another replica answered trafficAccessToken %v, want %s", again.Traffic, *c.Traffic)
	}
}
