package records

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestCacheBoundsAndExpiry(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	now := clk.Now()
	tr := newCache(3, clk)
	for i := range 5 {
		tr.put(fmt.Sprint("sb_", i), Record{Namespace: "ns", Deadline: now.Add(time.Duration(10+i) * time.Second), Metadata: map[string]string{"i": fmt.Sprint(i)}})
	}
	if tr.len() != 3 {
		t.Fatalf("len = %d, want the bound 3", tr.len())
	}
	// The ones closest to their deadline went first.
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := tr.get("ns", fmt.Sprint("sb_", i)); ok != want {
			t.Errorf("sb_%d kept = %v, want %v", i, ok, want)
		}
	}
	if _, ok := tr.get("other", "sb_4"); ok {
		t.Error("a record is visible from another namespace")
	}
	rec, _ := tr.get("ns", "sb_4")
	rec.Metadata["i"] = "changed"
	if again, _ := tr.get("ns", "sb_4"); again.Metadata["i"] != "4" {
		t.Error("get hands out the stored map")
	}
	tr.extend("sb_2", now.Add(time.Hour))
	now = now.Add(20 * time.Second) // past sb_3 and sb_4
	clk.SetTime(now)
	if _, ok := tr.get("ns", "sb_3"); ok {
		t.Error("an expired record is served")
	}
	tr.put("sb_9", Record{Namespace: "ns", Deadline: now.Add(time.Minute)})
	if tr.len() != 2 {
		t.Errorf("len after prune = %d, want 2 (sb_2, sb_9)", tr.len())
	}
	tr.drop("sb_2")
	if _, ok := tr.get("ns", "sb_2"); ok || tr.len() != 1 {
		t.Error("drop left the record")
	}
}
