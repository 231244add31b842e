package node_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
