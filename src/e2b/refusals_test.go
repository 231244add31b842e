package e2b_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
)

// TestRefusalsCountedByReason: creates past the key's burst are counted
// as rate_limit, a malformed create as validation, and the surface's own
// answers (a create that succeeds, a 404) as nothing.
func TestRefusalsCountedByReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	e := newEnv(t, envOptions{config: func(c *e2b.Config) {
		c.Clock, c.CreateRate, c.CreateBurst, c.MaxSandboxes = clk, 1, 2, -1
		c.Refusals = metrics.NewRefusals(reg, metrics.FrontE2B)
	}})
	// The clock stands still: two creates pass, the third is refused.
	if got := statuses(t, e, keyA, 3); got[http.StatusCreated] != 2 || got[http.StatusTooManyRequests] != 1 {
		t.Fatalf("3 creates with a burst of 2 = %v, want 2 created and 1 refused", got)
	}
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyB, `{"templateID":`); r.status != http.StatusBadRequest {
		t.Fatalf("a truncated create body answered %d, want 400", r.status)
	}
	if r := e.do(t, http.MethodGet, "/sandboxes/sb_nothere", keyB, nil); r.status != http.StatusNotFound {
		t.Fatalf("an unknown sandbox answered %d, want 404", r.status)
	}
	want := `
# HELP sandbox_operator_refusals_total Requests a front refused, by front and reason: rate_limit, sandbox_cap, quota, validation, capacity.
# TYPE sandbox_operator_refusals_total counter
sandbox_operator_refusals_total{front="e2b",reason="capacity"} 0
sandbox_operator_refusals_total{front="e2b",reason="quota"} 0
sandbox_operator_refusals_total{front="e2b",reason="rate_limit"} 1
sandbox_operator_refusals_total{front="e2b",reason="sandbox_cap"} 0
sandbox_operator_refusals_total{front="e2b",reason="validation"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_refusals_total"); err != nil {
		t.Fatal(err)
	}
}
