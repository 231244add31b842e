// Package mesh_test runs the unmodified e2b JavaScript SDK against
// sandbox-e2b, the e2b surface and data plane on a sandboxd mesh without
// Kubernetes. The mesh is three simulated sandboxd nodes that gossip with
// each other; sandbox-e2b is given only the first and finds the others
// through the nodes' own /v1/peers. The suite is tests/e2e/js/mesh.test.mjs.
//
// The suite steers the fleet through a small control endpoint of this
// harness (E2E_CONTROL_URL): which node owns a sandbox, how many claims a
// node redirected, taking a node's warm VMs behind the mesh's back, and
// killing a node mid-run.
package mesh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	domain = "sandbox.mesh.test"
	// imageBase is the pool behind the SDK's default alias "base".
	imageBase = "e2b-base:latest"
	// imageSolo is pooled on nodes 1 (soloWarm1 VMs) and 2 (one) only, so
	// the suite can empty node 1's pool, make the mesh enter it while its
	// view still counts the warm VMs, and watch node 1 redirect.
	imageSolo = "solo:1"
	soloWarm1 = 2

	// The mesh refreshes its view often; the redirect case freezes node
	// 1's /v1/info (node.FreezeInfo) so the view keeps counting warm VMs the
	// node no longer has, as gossip lag would.
	meshRefresh = 200 * time.Millisecond

	setupTimeout = 2 * time.Minute
	suiteTimeout = 8 * time.Minute
	pollEvery    = 100 * time.Millisecond
)

func TestE2BSDKAgainstMesh(t *testing.T) {
	project := nodejs.Setup(t, "tests/e2e/js")
	project.Copy(t, "lib.mjs", "mesh.test.mjs")
	binary := testbin.Path(t, "SANDBOX_E2B", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b")

	dir := t.TempDir()
	token, secret, key := harness.RandomHex(t), harness.RandomHex(t), "e2b_"+harness.RandomHex(t)
	tokenFile := harness.WriteFile(t, dir, "sandboxd-token", token+"\n")
	secretFile := harness.WriteFile(t, dir, "envd-secret", secret+"\n")
	keyFile := harness.WriteFile(t, dir, "e2b-keys", key+"\n")
	aliasFile := harness.WriteFile(t, dir, "e2b-aliases", "base "+imageBase+"\n")

	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes:            3,
		RootToken:        token,
		EchoPorts:        []int{},
		EgressAttachment: true,
		Envd:             &simfleet.EnvdConfig{Secret: []byte(secret)},
		ScratchRoot:      filepath.Join(dir, "scratch"),
		Customize: func(i int, cfg *node.Config) {
			cfg.Pools = []sandboxd.PoolSpec{{Template: imageBase, Net: "egress", Warm: 2}, {Template: imageBase, Net: "none", Warm: 1}}
			switch i {
			case 1:
				cfg.Pools = append(cfg.Pools, sandboxd.PoolSpec{Template: imageSolo, Net: "egress", Warm: soloWarm1})
			case 2:
				cfg.Pools = append(cfg.Pools, sandboxd.PoolSpec{Template: imageSolo, Net: "egress", Warm: 1})
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fleet: %v", err)
		}
	})

	apiListener, apiAddr := harness.Listen(t)
	proxyListener, proxyAddr := harness.Listen(t)
	p, err := testbin.StartProcess("sandbox-e2b", binary, filepath.Join(dir, "sandbox-e2b.log"), []string{
		"--sandboxd=" + f.Addrs()[0],
		"--sandboxd-token-file=" + tokenFile,
		"--mesh-refresh-interval=" + meshRefresh.String(),
		"--e2b-bind-address=" + apiAddr,
		"--envd-proxy-bind-address=" + proxyAddr,
		"--e2b-domain=" + domain,
		"--e2b-envd-secret-file=" + secretFile,
		"--e2b-api-key-file=" + keyFile,
		"--e2b-template-alias-file=" + aliasFile,
	}, []string{"OPERATOR_LOG_LEVEL=debug"}, apiListener, proxyListener)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sandbox-e2b log:\n%s", p.LogTail(100))
		}
		if err := p.Stop(20 * time.Second); err != nil {
			t.Errorf("stop sandbox-e2b: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	harness.WaitHealthy(t, ctx, p, "http://"+apiAddr+"/health")
	harness.WaitHealthy(t, ctx, p, "http://"+proxyAddr+"/healthz")

	control := startControl(t, f, token)
	suiteCtx, suiteCancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer suiteCancel()
	project.Run(t, suiteCtx, []string{
		"E2B_API_URL=http://" + apiAddr,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + domain,
		"E2B_API_KEY=" + key,
		"E2E_CONTROL_URL=" + control,
		"E2E_SOLO_TEMPLATE=" + imageSolo,
	}, "--test", "--test-reporter=spec", "--test-concurrency=1", "mesh.test.mjs")
}

// startControl serves the suite's view into the fleet on loopback.
func startControl(t *testing.T, f *simfleet.Fleet, token string) string {
	mux := http.NewServeMux()
	nodeIndex := func(r *http.Request) (int, error) {
		i, err := strconv.Atoi(r.URL.Query().Get("node"))
		if err != nil || i < 0 || i >= len(f.Nodes()) {
			return 0, fmt.Errorf("bad node %q", r.URL.Query().Get("node"))
		}
		return i, nil
	}
	// GET /owner?id= → {"node": i}, or 404 when no live node lists it.
	mux.HandleFunc("GET /owner", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		for i, n := range f.Nodes() {
			if !f.Alive(i) {
				continue
			}
			for _, e := range n.Snapshot().Entries {
				if sandbox.SameID(e.ID, id) {
					writeJSON(w, map[string]int{"node": i})
					return
				}
			}
		}
		http.NotFound(w, r)
	})
	// GET /counters?node= → the node's redirect and claim counters.
	mux.HandleFunc("GET /counters", func(w http.ResponseWriter, r *http.Request) {
		i, err := nodeIndex(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c := f.Node(i).Counters()
		writeJSON(w, map[string]int64{"redirects": c.Redirects, "claimsWarm": c.ClaimsWarm})
	})
	// POST /empty-pool?node=&template= sets the node's egress pool of the
	// template to no warm VMs, behind the mesh's back: the node's /v1/info
	// stays frozen at the warm VMs it had until the test ends.
	mux.HandleFunc("POST /empty-pool", func(w http.ResponseWriter, r *http.Request) {
		i, err := nodeIndex(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cl, err := sandboxd.New(f.Addrs()[i], sandboxd.WithToken(token))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		template := r.URL.Query().Get("template")
		t.Cleanup(f.Node(i).FreezeInfo())
		info, err := cl.Info(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var pools []sandboxd.PoolSpec
		for _, p := range info.Pools {
			spec := sandboxd.PoolSpec{Template: p.Key.Template, Net: p.Key.Net, Size: p.Key.Size, Warm: p.Target}
			if p.Key.Template == template {
				spec.Warm = 0
			}
			pools = append(pools, spec)
		}
		if _, err := cl.SetPools(r.Context(), pools); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// The node's own count, not its frozen /v1/info.
		err = wait.PollUntilContextTimeout(r.Context(), pollEvery, 30*time.Second, true, func(context.Context) (bool, error) {
			for _, p := range info.Pools {
				if p.Key.Template == template && f.Node(i).WarmCount(p.Key) > 0 {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	// POST /kill?node= stops the node as a crash would: its listener and
	// everything it served go away without a word to its peers.
	mux.HandleFunc("POST /kill", func(w http.ResponseWriter, r *http.Request) {
		i, err := nodeIndex(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := f.Kill(i); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
