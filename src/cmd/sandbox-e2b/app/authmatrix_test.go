package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b/app"
	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/e2b/buildstore"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/internal/e2btest"
	"github.com/cocoonstack/sandbox-operator/src/internal/envdproxytest"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// TestAuthMatrix runs the e2b surface's and the data plane's auth
// matrices (e2btest, envdproxytest) through the assembled sandbox-e2b
// process: every route its surface lists and every way its data plane is
// addressed, with the same credentials and rules as the packages' own
// matrices, so the assembly keeps every guard.
func TestAuthMatrix(t *testing.T) {
	const (
		root     = "mesh-root-token"
		image    = "ghcr.io/example/e2b-rt:24.04"
		keyA     = "mesh-key-team-a"
		keyB     = "mesh-key-team-b"
		echoPort = 8080
	)
	secret := []byte("mesh-envd-secret")
	pool := sandbox.PoolKey{Template: image, Net: "none", Size: "small"}
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 2, RootToken: root, EchoPorts: []int{echoPort}, Envd: &simfleet.EnvdConfig{Secret: secret},
		Pools: []sandboxd.PoolSpec{{Template: pool.Template, Net: pool.Net, Size: pool.Size, Warm: 6}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range f.Nodes() {
		if err := n.WaitWarm(ctx, pool, 6); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := e2b.ParseAPIKeys([]byte(keyA+" team-a\n"+keyB+" team-b\n"), "default")
	if err != nil {
		t.Fatal(err)
	}
	aliases, err := e2b.ParseAliases([]byte("base " + image + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := buildstore.NewDir(t.TempDir(), []byte("mesh-upload-signing-key"), 1<<20, time.Hour, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := app.Start(ctx, app.Config{
		E2B: e2b.Config{
			Namespace: "default", Domain: "sandbox.test", EnvdSecret: secret, Keys: keys, Aliases: aliases,
			Builds: &e2b.BuildConfig{Parallel: 2, Timeout: 2 * time.Minute, LogLines: 100, Store: store, Uploads: store.UploadHandler()},
		},
		APIAddress: "127.0.0.1:0", ProxyAddress: "127.0.0.1:0",
		Seeds: f.Addrs(), Token: root, RefreshInterval: time.Second, NodeTimeout: 5 * time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	s := e2btest.Surface{
		URL: "http://" + p.APIAddr().String(), Client: client, Routes: app.Surface(p).Routes(),
		KeyA: keyA, KeyB: keyB, Base: "base", RootToken: root, NodeAddrs: f.Addrs(),
	}
	o := e2btest.Setup(t, s)

	// The data plane first: the surface's matrix ends by deleting A's
	// sandbox. The other sandbox is B's, so its token crosses namespaces.
	_, theirs := s.Create(t, keyB)
	dp := envdproxytest.Run(t, envdproxytest.Plane{
		URL: "http://" + p.ProxyAddr().String(), Client: client, Domain: "sandbox.test",
		Sandbox: o.Sandbox, AccessToken: o.AccessToken, ClaimToken: s.ClaimToken(t, o.Sandbox),
		OtherAccessToken: theirs, RootToken: root, APIKey: keyA,
		Ports: []envdproxytest.Port{
			{Port: envdproxy.EnvdPort, Path: "/envs", Want: http.StatusOK},
			{Port: echoPort, Path: "/", Want: http.StatusOK},
		},
	})
	t.Logf("data plane: %d modes × %d ports × %d ids × %d credentials = %d cells asserted, %d unexpected",
		dp.Modes, dp.Ports, dp.IDs, dp.Credentials, dp.Cells, dp.Unexpected)

	n := e2btest.Run(t, s, o)
	t.Logf("e2b surface: %d routes, %d instances × %d credentials = %d foreign cells, %d control cells (A's key), %d cells asserted, %d of B's 404s compared with unknown ids, %d unexpected",
		n.Routes, n.Instances, n.Credentials, n.Foreign, n.Control, n.Cells, n.Compared, n.Unexpected)
}
