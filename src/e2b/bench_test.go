package e2b_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// BenchmarkCreate compares one sandbox create through the e2b surface
// (SDK-shaped HTTP request over loopback, key check, template
// resolution, the fleet's claim, envd's POST /init through the node's
// relay, the answer with the derived envd token)
// with the bare sandboxd claim it wraps, on the same one-node simulator
// whose pool refills instantly, so every claim is a warm hit. Releases
// run outside the timer.
func BenchmarkCreate(b *testing.B) {
	const warm = 256
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		RootToken: rootToken, EchoPorts: []int{},
		Pools: []sandboxd.PoolSpec{{Template: image, Net: "none", Size: "small", Warm: warm}},
		// Every e2b create hands envd its access token (POST /init).
		Envd: &simfleet.EnvdConfig{Secret: envdSecret},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	poolKey := sandbox.PoolKey{Template: image, Net: "none", Size: "small"}
	ctx := context.Background()
	node, err := sandboxd.New(f.Node(0).Addr(), sandboxd.WithToken(rootToken))
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	// settle releases what the loop claimed and waits for a full pool.
	settle := func(b *testing.B) {
		for _, id := range ids {
			if err := node.Release(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		ids = ids[:0]
		if err := f.Node(0).WaitWarm(ctx, poolKey, warm); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("sandboxd-direct", func(b *testing.B) {
		settle(b)
		req := sandboxd.ClaimRequest{Template: image, Net: "none", Size: "small", TTLSeconds: 300, ClaimRef: "bench/direct"}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			cl, err := node.Claim(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if ids = append(ids, cl.ID); len(ids) == warm/2 {
				b.StopTimer()
				settle(b)
				b.StartTimer()
			}
		}
		b.StopTimer()
		settle(b)
	})

	b.Run("e2b-http", func(b *testing.B) {
		settle(b)
		keys, _ := e2b.ParseAPIKeys([]byte(keyA+" bench\n"), "default")
		aliases, _ := e2b.ParseAliases([]byte("base " + image + "\n"))
		srv, err := e2b.NewServer(e2b.Config{Domain: domain, EnvdSecret: envdSecret, Keys: keys, Aliases: aliases,
			CreateRate: -1, MaxSandboxes: -1},
			newFleet(b, f), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		defer hs.Close()
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		body := []byte(`{"templateID":"base","timeout":300,"allow_internet_access":false,"metadata":{"run":"bench"}}`)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v2/sandboxes", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-KEY", keyA)
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var c struct {
				SandboxID string `json:"sandboxID"`
			}
			err = json.NewDecoder(resp.Body).Decode(&c)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusCreated {
				b.Fatalf("create = %d, %v", resp.StatusCode, err)
			}
			id, _ := sandbox.CanonicalID(c.SandboxID)
			if ids = append(ids, id); len(ids) == warm/2 {
				b.StopTimer()
				settle(b)
				b.StartTimer()
			}
		}
		b.StopTimer()
		settle(b)
	})
	if c := f.Node(0).Counters(); c.ClaimsCold+c.ClaimsClone > 0 {
		b.Errorf("%d claims missed the warm pool", c.ClaimsCold+c.ClaimsClone)
	}
}
