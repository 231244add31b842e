package apiserverenv

import (
	"strings"
	"testing"
)

func TestPoolsFull(t *testing.T) {
	pool := func(warm, target int64) map[string]any {
		return map[string]any{"template": "base", "warm": warm, "target": target}
	}
	for _, tc := range []struct {
		name      string
		inventory map[string]any
		minPools  int
		wantFull  bool
		wantWhy   string
	}{
		{name: "all pools at target", inventory: map[string]any{"pools": []any{pool(3, 3), pool(4, 4)}}, minPools: 2, wantFull: true},
		{name: "above target", inventory: map[string]any{"pools": []any{pool(5, 3)}}, wantFull: true},
		{name: "one pool filling", inventory: map[string]any{"pools": []any{pool(3, 3), pool(1, 4)}}, wantWhy: "publishes pool map["},
		{name: "empty pool without a target", inventory: map[string]any{"pools": []any{pool(0, 0)}}, wantWhy: "publishes pool map["},
		{name: "fewer pools than wanted", inventory: map[string]any{"pools": []any{pool(3, 3)}}, minPools: 2, wantWhy: "publishes 1 pools"},
		{name: "no pools field, none wanted", inventory: map[string]any{}, wantFull: true},
		{name: "no pools field, one wanted", inventory: map[string]any{}, minPools: 1, wantWhy: "publishes 0 pools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, why := poolsFull(tc.inventory, tc.minPools)
			if full != tc.wantFull {
				t.Fatalf("poolsFull = %v (%q), want %v", full, why, tc.wantFull)
			}
			if !strings.HasPrefix(why, tc.wantWhy) || (tc.wantWhy == "") != (why == "") {
				t.Errorf("why = %q, want it to start with %q", why, tc.wantWhy)
			}
		})
	}
}
