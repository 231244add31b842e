package node_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// BenchmarkWarmClaimInProcess is the node's own share of a warm claim:
// auth, body decode, pool pop, id and token minting, response encode —
// the HTTP handler driven directly, no network.
func BenchmarkWarmClaimInProcess(b *testing.B) {
	cfg := testConfig()
	cfg.Pools = []sandboxd.PoolSpec{{Template: tmpl, Warm: 256}}
	n := startNode(b, cfg)
	h := n.Handler()
	body := `{"template":"` + tmpl + `","claim_ref":"bench/claim"}`
	var ids []string
	// Release outside the timer now and then, so the benchmark measures a
	// node in steady state rather than one holding every claim ever made.
	releaseAll := func() {
		for _, id := range ids {
			req := httptest.NewRequest(http.MethodPost, "/v1/sandboxes/"+id+"/release", nil)
			req.Header.Set("Authorization", "Bearer "+rootToken)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				b.Fatalf("release: %d", rec.Code)
			}
		}
		ids = ids[:0]
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest(http.MethodPost, "/v1/claim", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+rootToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("claim: %d %s", rec.Code, rec.Body)
		}
		// The id is the first field of the answer; slicing it out keeps
		// response decoding out of the node's number.
		id, _, _ := strings.Cut(strings.TrimPrefix(rec.Body.String(), `{"id":"`), `"`)
		if ids = append(ids, id); len(ids) == 1024 {
			b.StopTimer()
			releaseAll()
			b.StartTimer()
		}
	}
	b.StopTimer()
	releaseAll()
	if c := n.Counters(); c.ClaimsCold+c.ClaimsClone > 0 {
		b.Fatalf("%d claims missed the warm pool", c.ClaimsCold+c.ClaimsClone)
	}
}

// BenchmarkFirstRequestRunning is one HTTP request to a running sandbox's
// guest through the ports relay with the sandbox's token: the relay
// upgrade, the guest's answer, the close. BenchmarkFirstRequestArchived is
// the same request to a sandbox the node archived at its lease's end
// (on_expire "archive"): the relay wakes it first, with a fresh lease, and
// restarts its guest. The difference is the simulator's wake path; a real
// node adds its restore (sandboxd's published wake: 55-190 ms).
func BenchmarkFirstRequestRunning(b *testing.B) { benchFirstRequest(b, false) }

// BenchmarkFirstRequestArchived: see BenchmarkFirstRequestRunning.
func BenchmarkFirstRequestArchived(b *testing.B) { benchFirstRequest(b, true) }

func benchFirstRequest(b *testing.B, archived bool) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	cfg.ReapInterval = time.Hour // the benchmark drives the reaper
	cfg.Pools = []sandboxd.PoolSpec{{Template: tmpl, Warm: 8}}
	n := startNode(b, cfg)
	ctx := context.Background()
	root := client(b, n, rootToken)
	get := func(own *sandboxd.Client, id string) {
		conn, err := own.DialPort(ctx, id, echoPort)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: guest\r\nConnection: close\r\n\r\n"); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("guest answered %d", resp.StatusCode)
		}
	}
	b.ReportAllocs()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 60, OnExpire: sandboxd.ExpireArchive})
		if err != nil {
			b.Fatal(err)
		}
		own := root.As(cl.Token)
		get(own, cl.ID) // the guest is up: both cases start from a serving sandbox
		if archived {
			clock.Step(61 * time.Second)
			n.ReapExpired()
			if row, err := root.Sandbox(ctx, cl.ID); err != nil || !row.Archived {
				b.Fatalf("the sandbox was not archived at its lease's end: %+v %v", row, err)
			}
		}
		b.StartTimer()
		get(own, cl.ID)
		b.StopTimer()
		if archived {
			if row, err := root.Sandbox(ctx, cl.ID); err != nil || row.Archived || row.Hibernated {
				b.Fatalf("the request did not wake the archived sandbox: %+v %v", row, err)
			}
		}
		if err := root.Release(ctx, cl.ID); err != nil {
			b.Fatal(err)
		}
	}
}
