package warmpool

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

func nodeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%02d", i)
	}
	return out
}

func sum(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}

func TestPlaceIsEven(t *testing.T) {
	key := sandbox.PoolKey{Template: "base", Net: "none", Size: "small"}
	for _, nodes := range []int{1, 2, 3, 7, 20} {
		for _, replicas := range []int{0, 1, 5, 19, 20, 21, 50000} {
			got := Place(key, replicas, nodeNames(nodes))
			if s := sum(got); s != replicas {
				t.Fatalf("%d over %d nodes: shares sum to %d", replicas, nodes, s)
			}
			lo, hi := replicas/nodes, (replicas+nodes-1)/nodes
			for n, share := range got {
				if share < lo || share > hi || share == 0 {
					t.Errorf("%d over %d nodes: %s holds %d, want %d..%d and never 0", replicas, nodes, n, share, lo, hi)
				}
			}
			if want := min(replicas, nodes); len(got) != want {
				t.Errorf("%d over %d nodes: %d nodes hold a share, want %d", replicas, nodes, len(got), want)
			}
		}
	}
	if got := Place(key, 5, nil); got != nil {
		t.Errorf("no nodes: got %v", got)
	}
}

func TestPlaceIgnoresInputOrder(t *testing.T) {
	key := sandbox.PoolKey{Template: "python", Net: "none", Size: "large"}
	nodes := nodeNames(9)
	want := Place(key, 31, nodes)
	rev := slices.Clone(nodes)
	slices.Reverse(rev)
	if got := Place(key, 31, rev); !maps.Equal(got, want) {
		t.Fatalf("reordered input placed %v, want %v", got, want)
	}
}

// moved counts the replicas taken off nodes between two placements.
func moved(before, after map[string]int) int {
	m := 0
	for n, b := range before {
		if a := after[n]; a < b {
			m += b - a
		}
	}
	return m
}

// TestPlaceMovesOnlyTheChangedNodesShare is the stability bound: a node
// joining takes its share only from the others (none gains), so what
// moves is exactly its share; a node leaving hands its share only to the
// others (none loses).
func TestPlaceMovesOnlyTheChangedNodesShare(t *testing.T) {
	keys := []sandbox.PoolKey{
		{Template: "base", Net: "none", Size: "small"},
		{Template: "python:3.12", Net: "none", Size: "large"},
		{Template: "node", Net: "egress", Size: "small"},
	}
	for _, key := range keys {
		for n := 1; n <= 12; n++ {
			for _, replicas := range []int{1, 3, n - 1, n, n + 1, 2*n + 3, 1000, 50000} {
				if replicas <= 0 {
					continue
				}
				before := nodeNames(n)
				joined := append(slices.Clone(before), "joiner")
				pb, pa := Place(key, replicas, before), Place(key, replicas, joined)
				for _, node := range before {
					if pa[node] > pb[node] {
						t.Fatalf("%s, %d replicas, %d→%d nodes: %s grew %d→%d on a join", key, replicas, n, n+1, node, pb[node], pa[node])
					}
				}
				if m := moved(pb, pa); m != pa["joiner"] {
					t.Fatalf("%s, %d replicas: a join moved %d, the joiner holds %d", key, replicas, m, pa["joiner"])
				}
				if pa["joiner"] > (replicas+n)/(n+1) {
					t.Fatalf("%s, %d replicas: joiner holds %d, above ceil(r/(n+1))", key, replicas, pa["joiner"])
				}

				// Every node in turn leaves.
				for i, gone := range before {
					left := slices.Delete(slices.Clone(before), i, i+1)
					pl := Place(key, replicas, left)
					for _, node := range left {
						if pl[node] < pb[node] {
							t.Fatalf("%s, %d replicas: %s shrank %d→%d when %s left", key, replicas, node, pb[node], pl[node], gone)
						}
					}
					if len(left) > 0 && moved(pb, pl) != pb[gone] {
						t.Fatalf("%s, %d replicas: %s leaving moved %d, it held %d", key, replicas, gone, moved(pb, pl), pb[gone])
					}
				}
			}
		}
	}
}

// TestPlaceSpreadsRemaindersAcrossKeys: many one-replica pools over the
// same nodes must not all land on the same node.
func TestPlaceSpreadsRemaindersAcrossKeys(t *testing.T) {
	nodes := nodeNames(4)
	hits := map[string]int{}
	for i := range 200 {
		for n := range Place(sandbox.PoolKey{Template: fmt.Sprintf("t%d", i), Net: "none", Size: "small"}, 1, nodes) {
			hits[n]++
		}
	}
	for _, n := range nodes {
		if hits[n] < 20 {
			t.Errorf("node %s took %d of 200 single-replica pools: remainders are not spread (%v)", n, hits[n], hits)
		}
	}
}
