package monitoring_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// flatSandboxes is how many sandboxes TestSeriesStayFlat creates.
const flatSandboxes = 2000

// TestSeriesStayFlat: thousands of sandboxes, each created, reached
// through the data plane and killed, add no series to what sandbox-e2b or
// either node exports: no label carries a sandbox's id, name or namespace.
// A first round makes every outcome the loop can meet (a claim refused at
// a node's max_claims, a relay to a port nothing listens on) before the
// count is taken.
func TestSeriesStayFlat(t *testing.T) {
	s := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	s.warmUp(t, ctx)
	before := s.seriesCounts(t, ctx)
	for i := range flatSandboxes {
		s.cycle(t, ctx, i)
	}
	after := s.seriesCounts(t, ctx)
	for target, n := range before {
		if after[target] != n {
			t.Errorf("%s exported %d series before %d sandboxes and %d after", target, n, flatSandboxes, after[target])
		}
	}
	t.Logf("series per binary over %d sandboxes: %v", flatSandboxes, after)
}

// warmUp makes the outcomes of a claim the loop may meet: it fills both
// nodes to their max_claims (the next create is refused, 429), reaches a
// port nothing listens on, then kills what it made.
func (s *system) warmUp(t *testing.T, ctx context.Context) {
	t.Helper()
	var sbs []sandboxRef
	for {
		status, body, err := s.e2b.call(ctx, http.MethodPost, "/sandboxes", `{"templateID":"base","allow_internet_access":false}`)
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusTooManyRequests {
			break
		}
		if status != http.StatusCreated {
			t.Fatalf("create answered %d: %s", status, body)
		}
		sbs = append(sbs, created(t, body))
		if len(sbs) > 2*maxClaims {
			t.Fatalf("%d creates passed two nodes of max_claims %d", len(sbs), maxClaims)
		}
	}
	if status, err := s.e2b.envdPort(ctx, sbs[0], 1); err != nil || status != http.StatusBadGateway {
		t.Fatalf("a port nothing listens on answered %d %v, want 502", status, err)
	}
	for _, sb := range sbs {
		s.e2b.must(t, ctx, http.MethodDelete, "/sandboxes/"+sb.ID, nil, http.StatusNoContent, nil)
	}
}

// cycle creates a sandbox, reaches its envd through the data plane and
// kills it. One sandbox lives at a time, far below the nodes' max_claims,
// and a node provisions on a warm miss: every create must succeed.
func (s *system) cycle(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	status, body, err := s.e2b.call(ctx, http.MethodPost, "/sandboxes", `{"templateID":"base","allow_internet_access":false}`)
	if err != nil {
		t.Fatalf("sandbox %d: %v", i, err)
	}
	if status != http.StatusCreated {
		t.Fatalf("sandbox %d: create answered %d: %s", i, status, body)
	}
	sb := created(t, body)
	if status, err := s.e2b.envdHealth(ctx, sb); err != nil || status/100 != 2 {
		t.Fatalf("sandbox %d: envd /health answered %d %v", i, status, err)
	}
	s.e2b.must(t, ctx, http.MethodDelete, "/sandboxes/"+sb.ID, nil, http.StatusNoContent, nil)
}

// seriesCounts counts the series (samples, a histogram's buckets each
// one) every scraped binary exports now, by job.
func (s *system) seriesCounts(t *testing.T, ctx context.Context) map[string]int {
	t.Helper()
	out := map[string]int{"sandbox-e2b": countSeries(t, ctx, s.metric, "")}
	for _, n := range s.nodes {
		out["sandboxd-"+n.name] = countSeries(t, ctx, "http://"+n.addr+"/metrics", s.token)
	}
	return out
}

func countSeries(t *testing.T, ctx context.Context, url, bearer string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s answered %d", url, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	n := 0
	for name, f := range families {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue // the runtime's own, which vary with GC and threads, not with sandboxes
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				n += len(m.GetHistogram().GetBucket()) + 2
			case m.GetSummary() != nil:
				n += len(m.GetSummary().GetQuantile()) + 2
			default:
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("GET %s: no series", url)
	}
	return n
}

// created decodes a create's answer.
func created(t *testing.T, body []byte) sandboxRef {
	t.Helper()
	var sb sandboxRef
	if err := json.Unmarshal(body, &sb); err != nil || sb.ID == "" || sb.AccessToken == "" {
		t.Fatalf("a create answered %s (%v)", body, err)
	}
	return sb
}
