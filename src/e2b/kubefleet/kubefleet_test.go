package kubefleet_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/e2b/kubefleet"
	"github.com/cocoonstack/sandbox-operator/src/inventory/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/sandboxes"
	"github.com/cocoonstack/sandbox-operator/src/simulator/fleet"
)

const (
	rootToken = "kubefleet-root"
	image     = "ghcr.io/example/e2b-rt:24.04"
)

var key = sandbox.PoolKey{Template: image, Net: "none", Size: "small"}

type env struct {
	fleet *fleet.Fleet
	inv   *inventorytest.Harness
	svc   *sandboxes.Service
	kf    *kubefleet.Fleet
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f, err := fleet.Start(ctx, fleet.Config{
		Nodes: 2, RootToken: rootToken, EchoPorts: []int{},
		Pools: []sandboxd.PoolSpec{{Template: image, Net: "none", Size: "small", Warm: 3}},
		Envd:  &fleet.EnvdConfig{Secret: []byte("secret")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	for _, n := range f.Nodes() {
		if err := n.WaitWarm(ctx, key, 3); err != nil {
			t.Fatal(err)
		}
	}
	h := inventorytest.Start(t, inventorytest.Options{StaleAfter: 90 * time.Second})
	svc, err := sandboxes.New(sandboxes.Config{Inventory: h.Store, Token: rootToken})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	kf, err := kubefleet.New(kubefleet.Config{Service: svc, Store: h.Store, Token: rootToken})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{fleet: f, inv: h, svc: svc, kf: kf}
	e.publish(t)
	return e
}

// publish makes every node publish its snapshot and waits for the store.
func (e *env) publish(t *testing.T) {
	t.Helper()
	now := time.Now().Add(time.Second).Truncate(time.Second)
	for _, n := range e.fleet.Nodes() {
		e.inv.Publish(inventorytest.FromSnapshot(n.Snapshot(), now))
	}
	e.inv.Eventually("the publish", func() bool {
		for _, n := range e.fleet.Nodes() {
			got, ok := e.inv.Store.Node(n.Name())
			if !ok || !got.PublishedAt.Equal(now) || got.Entries != len(n.Snapshot().Entries) {
				return false
			}
		}
		return true
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestClaimIsAKubectlVisibleSandbox(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c, err := e.kf.Claim(ctx, e2b.ClaimRequest{Namespace: "team-a", Name: "e2b-one", Key: key, TTLSeconds: 120})
	if err != nil {
		t.Fatal(err)
	}
	if c.ClaimToken == "" || c.Namespace != "team-a" || c.Name != "e2b-one" || c.NodeAddr == "" || c.Key != key {
		t.Fatalf("claimed = %+v", c.Sandbox)
	}
	if d := time.Until(c.Deadline); d < 100*time.Second || d > 130*time.Second {
		t.Errorf("deadline in %v, want the 120 s lease", d)
	}
	// kubectl get sees it at once, before any publish.
	obj, err := e.svc.Get(ctx, "team-a", "e2b-one")
	if err != nil || obj.Annotations[sandbox.AnnotationID] != c.ID {
		t.Fatalf("Service.Get = %v, %v", obj, err)
	}
	// The token is the sandbox's own: it opens the relay.
	cl, _ := sandboxd.New(c.NodeAddr, sandboxd.WithToken(c.ClaimToken))
	if _, err := cl.Owner(ctx, c.ID); err != nil {
		t.Errorf("the claim token does not own the sandbox: %v", err)
	}

	// Get in both spellings, before and after the publish; never from
	// another namespace.
	dns, _ := sandbox.DNSID(c.ID)
	for round := range 2 {
		for _, id := range []string{c.ID, dns} {
			got, err := e.kf.Get(ctx, "team-a", id)
			if err != nil || got.ID != c.ID || got.Name != "e2b-one" || got.NodeAddr == "" {
				t.Errorf("round %d: Get(%s) = %+v, %v", round, id, got, err)
			}
			if _, err := e.kf.Get(ctx, "team-b", id); !errors.Is(err, e2b.ErrNotFound) {
				t.Errorf("round %d: Get from team-b = %v, want ErrNotFound", round, err)
			}
		}
		list, err := e.kf.List(ctx, "team-a")
		if err != nil || len(list) != 1 || list[0].ID != c.ID {
			t.Errorf("round %d: List = %+v, %v", round, list, err)
		}
		if list, _ := e.kf.List(ctx, "team-b"); len(list) != 0 {
			t.Errorf("round %d: team-b lists %+v", round, list)
		}
		e.publish(t)
	}

	// Renew moves the deadline on the node and in the view.
	deadline, err := e.kf.Renew(ctx, c.Sandbox, 3600)
	if err != nil || time.Until(deadline) < 3500*time.Second {
		t.Fatalf("Renew = %v, %v", deadline, err)
	}
	if got, _ := e.kf.Get(ctx, "team-a", c.ID); !got.Deadline.Equal(deadline) {
		t.Errorf("deadline after renew = %v, want %v", got.Deadline, deadline)
	}

	// Pause and resume show at once.
	if err := e.kf.Pause(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.kf.Get(ctx, "team-a", c.ID); !got.Paused {
		t.Error("not paused after Pause")
	}
	if err := e.kf.Resume(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.kf.Get(ctx, "team-a", c.ID); got.Paused {
		t.Error("paused after Resume")
	}
	nodes, err := e.kf.Nodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Errorf("Nodes = %d, %v", len(nodes), err)
	}

	if err := e.kf.Release(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kf.Get(ctx, "team-a", c.ID); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("Get after Release = %v", err)
	}
	if err := e.kf.Release(ctx, c.Sandbox); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("second Release = %v, want ErrNotFound", err)
	}
}

func TestClaimErrors(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	_, err := e.kf.Claim(ctx, e2b.ClaimRequest{Namespace: "team-a", Name: "e2b-x", Key: sandbox.PoolKey{Template: image, Net: "egress", Size: "small"}})
	if !errors.Is(err, sandboxd.ErrCapacity) {
		t.Errorf("claim of an unpooled lane = %v, want ErrCapacity", err)
	}
	if _, err := e.kf.Claim(ctx, e2b.ClaimRequest{Namespace: "Bad_NS", Name: "x", Key: key}); !errors.Is(err, sandboxd.ErrBadRequest) {
		t.Errorf("bad namespace = %v, want ErrBadRequest", err)
	}
	if _, err := e.kf.Claim(ctx, e2b.ClaimRequest{Namespace: "team-a", Name: "dup", Key: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kf.Claim(ctx, e2b.ClaimRequest{Namespace: "team-a", Name: "dup", Key: key}); !errors.Is(err, sandboxd.ErrConflict) {
		t.Errorf("a second claim under one name = %v, want ErrConflict", err)
	}
}

// The surface over the Kubernetes fleet: the e2b create is a Sandbox in
// the key's namespace, with a working access token.
func TestSurfaceOverKubeFleet(t *testing.T) {
	e := newEnv(t)
	keys, _ := e2b.ParseAPIKeys([]byte("ka team-a\n"), "default")
	srv, err := e2b.NewServer(e2b.Config{Domain: "d.example", EnvdSecret: []byte("secret"), Keys: keys}, e.kf, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v2/sandboxes",
		strings.NewReader(`{"templateID":"`+image+`","allow_internet_access":false,"envVars":{"K":"V"},"metadata":{"m":"1"}}`))
	req.Header.Set("X-API-KEY", "ka")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create = %d", resp.StatusCode)
	}
	list, _, err := e.svc.List(ctxT(t), "team-a")
	if err != nil || len(list) != 1 || !strings.HasPrefix(list[0].Name, "e2b-") {
		t.Fatalf("kubectl get sandboxes -n team-a = %+v, %v", list, err)
	}
}
