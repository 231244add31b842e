package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Panel is one query of one dashboard panel.
type Panel struct{ Title, Expr string }

// NoDataError says a panel's query returned nothing.
type NoDataError struct{ Panel Panel }

func (e *NoDataError) Error() string {
	return "panel " + e.Panel.Title + ": no data for " + e.Panel.Expr
}

// Panels reads a Grafana dashboard (its JSON model) and returns every
// panel's queries, with Grafana's variables replaced by what Grafana would
// send for a short range ($__rate_interval and the like).
func Panels(dashboard []byte) ([]Panel, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []Panel
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "5m")
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			out = append(out, Panel{Title: p.Title, Expr: vars.Replace(target.Expr)})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dashboard: no panel queries")
	}
	return out, nil
}

// HasData runs the panel's query once: nil when it returns a sample, a
// *NoDataError when it returns none.
func (s *Server) HasData(ctx context.Context, p Panel) error {
	res, err := s.Query(ctx, p.Expr)
	if err != nil {
		return err
	}
	if len(res) == 0 {
		return &NoDataError{Panel: p}
	}
	return nil
}
