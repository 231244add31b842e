package warmpool

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func TestDesiredSetsSumPoolsOfOneKey(t *testing.T) {
	base := sandbox.PoolKey{Template: "base", Net: "none", Size: "small"}
	py := sandbox.PoolKey{Template: "python", Net: "none", Size: "small"}
	demands := []demand{
		{Pool: types.NamespacedName{Namespace: "a", Name: "one"}, Key: base, Replicas: 4},
		{Pool: types.NamespacedName{Namespace: "b", Name: "two"}, Key: base, Replicas: 5},
		{Pool: types.NamespacedName{Namespace: "a", Name: "py"}, Key: py, Replicas: 1},
		{Pool: types.NamespacedName{Namespace: "a", Name: "neg"}, Key: py, Replicas: -3},
	}
	totals := totalsByKey(demands)
	if totals[base] != 9 || totals[py] != 1 {
		t.Fatalf("totals = %v, want base 9 and python 1", totals)
	}
	nodes := []string{"n1", "n2", "n3", "n4"}
	sets := desiredSets(totals, nodes)
	if len(sets) != len(nodes) {
		t.Fatalf("%d sets for %d nodes: every node needs its (possibly empty) set", len(sets), len(nodes))
	}
	perKey := map[sandbox.PoolKey]int{}
	for node, set := range sets {
		if set == nil {
			t.Errorf("node %s has a nil set; an empty set is what drains it", node)
		}
		seen := map[sandbox.PoolKey]bool{}
		for i, p := range set {
			if seen[p.Key()] {
				t.Errorf("node %s lists %s twice: sandboxd refuses duplicates", node, p.Key())
			}
			seen[p.Key()] = true
			if p.Warm <= 0 {
				t.Errorf("node %s: pool %s with warm %d is sent", node, p.Key(), p.Warm)
			}
			if i > 0 && compareKeys(set[i-1].Key(), p.Key()) >= 0 {
				t.Errorf("node %s: set not sorted by key: %v", node, set)
			}
			perKey[p.Key()] += p.Warm
		}
	}
	if perKey[base] != 9 || perKey[py] != 1 {
		t.Errorf("placed %v, want base 9 and python 1 in all", perKey)
	}
	if got := desiredSets(nil, nodes)["n1"]; got == nil || len(got) != 0 {
		t.Errorf("no pools wanted: node set = %#v, want empty (drain everything)", got)
	}
}

func TestSignature(t *testing.T) {
	a := []sandboxd.PoolSpec{{Template: "base", Net: "none", Size: "small", Warm: 3}}
	b := []sandboxd.PoolSpec{{Template: "base", Net: "none", Size: "small", Warm: 4}}
	// Field boundaries must not blur: "ab"+"c" is not "a"+"bc".
	c := []sandboxd.PoolSpec{{Template: "ab", Net: "c", Size: "small", Warm: 1}}
	d := []sandboxd.PoolSpec{{Template: "a", Net: "bc", Size: "small", Warm: 1}}
	if signature(a) != signature([]sandboxd.PoolSpec{a[0]}) {
		t.Error("equal sets sign differently")
	}
	if signature(a) == signature(b) || signature(c) == signature(d) || signature(nil) == signature(a) {
		t.Error("different sets share a signature")
	}
}
