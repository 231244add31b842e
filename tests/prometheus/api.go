package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// Sample is one sample of an instant query's vector.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Series is one series of a range query: its labels and samples.
type Series struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// get calls one endpoint of the HTTP API and decodes its data into out.
func (s *Server) get(ctx context.Context, path string, q url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

// Query runs an instant PromQL query and returns its samples (a vector, or
// a scalar as one sample); an error for a query Prometheus refuses.
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	switch data.ResultType {
	case "vector":
		var out []Sample
		err := json.Unmarshal(data.Result, &out)
		return out, err
	case "scalar":
		var v [2]any
		err := json.Unmarshal(data.Result, &v)
		return []Sample{{Value: v}}, err
	default:
		return nil, fmt.Errorf("query %q: a %s result", expr, data.ResultType)
	}
}

// QueryRange runs a range query from start to end at step.
func (s *Server) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	var data struct {
		Result []Series `json:"result"`
	}
	q := url.Values{
		"query": {expr},
		"start": {strconv.FormatInt(start.Unix(), 10)},
		"end":   {strconv.FormatInt(end.Unix(), 10)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	if err := s.get(ctx, "/api/v1/query_range", q, &data); err != nil {
		return nil, fmt.Errorf("query_range %q: %w", expr, err)
	}
	return data.Result, nil
}

// Firing reports whether the alert named name fires now.
func (s *Server) Firing(ctx context.Context, name string) (bool, error) {
	res, err := s.Query(ctx, fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing"}`, name))
	return len(res) > 0, err
}

// Expect checks that expr's result is one sample of value want.
func (s *Server) Expect(ctx context.Context, expr string, want float64) error {
	res, err := s.Query(ctx, expr)
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("%s: %d samples, want 1", expr, len(res))
	}
	got, err := strconv.ParseFloat(fmt.Sprint(res[0].Value[1]), 64)
	if err != nil {
		return fmt.Errorf("%s: %w", expr, err)
	}
	if got != want {
		return fmt.Errorf("%s = %v, want %v", expr, got, want)
	}
	return nil
}

// ExpectFiring checks that the alert named name fires (want) or not.
func (s *Server) ExpectFiring(ctx context.Context, name string, want bool) error {
	on, err := s.Firing(ctx, name)
	if err != nil {
		return err
	}
	if on != want {
		return fmt.Errorf("%s firing = %v, want %v", name, on, want)
	}
	return nil
}

// WaitScraping waits until Prometheus scrapes want targets, every one of
// them successfully.
func (s *Server) WaitScraping(t testing.TB, ctx context.Context, want int) {
	t.Helper()
	poll.UntilNil(t, "prometheus to scrape every target", func() error {
		res, err := s.Query(ctx, "up")
		if err != nil {
			return err
		}
		if len(res) != want {
			return fmt.Errorf("%d of %d targets scraped: %v", len(res), want, res)
		}
		for _, r := range res {
			if fmt.Sprint(r.Value[1]) != "1" {
				return fmt.Errorf("target %s (%s) is down", r.Metric["job"], r.Metric["instance"])
			}
		}
		return nil
	})
}

// Rule is one rule of a loaded group, as the rules API reports it.
type Rule struct {
	Name      string `json:"name"`
	Type      string `json:"type"` // alerting or recording
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// RuleGroup is one loaded rule group.
type RuleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []Rule `json:"rules"`
}

// Rules lists the rule groups Prometheus has loaded.
func (s *Server) Rules(ctx context.Context) ([]RuleGroup, error) {
	var data struct {
		Groups []RuleGroup `json:"groups"`
	}
	if err := s.get(ctx, "/api/v1/rules", url.Values{}, &data); err != nil {
		return nil, err
	}
	return data.Groups, nil
}
