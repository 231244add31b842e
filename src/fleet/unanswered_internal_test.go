package fleet

import (
	"slices"
	"testing"
	"time"
)

func names(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

func TestUnansweredOrderAndExpiry(t *testing.T) {
	var u unanswered
	nodes := []Node{{Name: "a", Addr: "a:1"}, {Name: "b", Addr: "b:1"}, {Name: "c", Addr: "c:1"}}
	now := time.Unix(1000, 0)
	if got := names(u.last(nodes, now)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("no silent node: %v", got)
	}
	if !u.silent("a:1", now) {
		t.Error("the first silence of a node must report it")
	}
	if u.silent("a:1", now.Add(time.Second)) {
		t.Error("a node silent again must not report it again")
	}
	u.silent("b:1", now)
	if got := names(u.last(nodes, now)); !slices.Equal(got, []string{"c", "a", "b"}) {
		t.Errorf("silent a and b: %v, want the answering node first and the others in their order", got)
	}
	if !u.heard("a:1", now) || u.heard("a:1", now) {
		t.Error("heard must report the end of a silence once")
	}
	if got := names(u.last(nodes, now)); !slices.Equal(got, []string{"a", "c", "b"}) {
		t.Errorf("b still silent: %v", got)
	}
	// A silence nobody re-arms lapses.
	later := now.Add(unansweredFor)
	if got := names(u.last(nodes, later)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after the silence lapsed: %v", got)
	}
	if !u.silent("b:1", later) {
		t.Error("a silence after a lapsed one must report it")
	}
	// A node that left the fleet while silent does not stay in the set.
	u.silent("gone:1", later)
	u.silent("b:1", later.Add(unansweredFor))
	if _, ok := u.until["gone:1"]; ok || len(u.until) != 1 {
		t.Errorf("lapsed marks kept: %v", u.until)
	}
}
