package fleet

import (
	"math/rand/v2"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

func TestOrder(t *testing.T) {
	key := sandbox.PoolKey{Template: "base"}
	warm := func(name string, n int) Node {
		return Node{Name: name, Addr: name + ":7777", Warm: map[sandbox.PoolKey]int{key.WithDefaults(): n}}
	}
	// "drained" keeps a pool of key with none warm now; "cold" keeps none.
	cold := Node{Name: "cold", Addr: "cold:7777", Warm: map[sandbox.PoolKey]int{{Template: "other"}: 5}}
	nodes := []Node{cold, warm("drained", 0), warm("a", 3), {Name: "noaddr", Warm: map[sandbox.PoolKey]int{key.WithDefaults(): 9}}, warm("b", 1)}
	rng := rand.New(rand.NewPCG(7, 7))
	firsts := map[string]int{}
	for range 1000 {
		got := Order(nodes, key, false, rng)
		if len(got) != 3 || got[2].Name != "drained" {
			t.Fatalf("Order without cold = %v, want the two warm nodes, then the drained pool (it refills, and clones on a miss)", got)
		}
		firsts[got[0].Name]++
		withCold := Order(nodes, key, true, rng)
		if len(withCold) != 4 || withCold[2].Name != "drained" || withCold[3].Name != "cold" {
			t.Fatalf("Order with cold = %v", withCold)
		}
	}
	// Two of two drawn every time: the warmer always leads.
	if firsts["a"] != 1000 {
		t.Errorf("first choices = %v, want the warmer of the two every time", firsts)
	}

	// With more nodes than two, every warm node leads sometimes: the
	// policy spreads instead of always picking the warmest.
	many := []Node{warm("n1", 10), warm("n2", 8), warm("n3", 6), warm("n4", 4)}
	firsts = map[string]int{}
	for range 4000 {
		firsts[Order(many, key, false, rng)[0].Name]++
	}
	for _, n := range many[:3] {
		if firsts[n.Name] == 0 || firsts[n.Name] == 4000 {
			t.Errorf("first choices = %v", firsts)
		}
	}
	if firsts["n4"] != 0 {
		t.Errorf("the least warm node led %d times; it is never the warmer of two", firsts["n4"])
	}
}
