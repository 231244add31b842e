package backend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// pageAll pages through namespace with limit, calling between (if set)
// before each page after the first, and returns the keys in the order
// listed and the pages' Remaining estimates.
func pageAll(t *testing.T, svc *Service, namespace string, limit int, match func(*agentsv1beta1.Sandbox) bool, between func(page int)) (keys []string, remaining []int64) {
	t.Helper()
	var after sandbox.ClaimRef
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatal("paging does not end")
		}
		if page > 0 && between != nil {
			between(page)
		}
		res, err := svc.ListPage(context.Background(), namespace, registry.ListOptions{After: after, Limit: limit, Match: match})
		if err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(res.Items) > limit {
			t.Fatalf("page %d holds %d items, limit %d", page, len(res.Items), limit)
		}
		for i := range res.Items {
			keys = append(keys, res.Items[i].Namespace+"/"+res.Items[i].Name)
		}
		remaining = append(remaining, res.Remaining)
		if res.Next == (sandbox.ClaimRef{}) {
			if res.Remaining != 0 {
				t.Fatalf("last page estimates %d remaining", res.Remaining)
			}
			return keys, remaining
		}
		if last := res.Items[len(res.Items)-1]; res.Next != (sandbox.ClaimRef{Namespace: last.Namespace, Name: last.Name}) {
			t.Fatalf("Next %v is not the page's last item %s/%s", res.Next, last.Namespace, last.Name)
		}
		after = res.Next
	}
}

func TestListPageOrderAndRemaining(t *testing.T) {
	svc, h, _ := storeOnly(t, Config{})
	// "a-b" sorts after "a" as a namespace, though "a-b/…" sorts before
	// "a/…" as a string: the order is by namespace, then name.
	refs := []string{"b/x", "a-b/a", "a/z", "a/b", "a-b/c", "a/c", "b/a"}
	var entries []v1beta1.InventoryEntry
	for i, ref := range refs {
		entries = append(entries, invEntry(ref, fmt.Sprintf("sb_p%02d", i), v1beta1.SandboxPhaseRunning))
	}
	h.Publish(nodeInv("node-1", t0, entries[:4]...))
	h.Publish(nodeInv("node-2", t0, entries[4:]...))
	h.Eventually("every sandbox listed", func() bool { l, _, _ := svc.List(context.Background(), ""); return len(l) == len(refs) })

	want := []string{"a/b", "a/c", "a/z", "a-b/a", "a-b/c", "b/a", "b/x"}
	for _, limit := range []int{0, 1, 2, 3, 7, 100} {
		keys, remaining := pageAll(t, svc, "", limit, nil, nil)
		if !slices.Equal(keys, want) {
			t.Errorf("limit %d lists %v, want %v", limit, keys, want)
		}
		// Nothing changes, so each estimate is exact.
		for i, r := range remaining[:len(remaining)-1] {
			if wantLeft := int64(len(want) - (i+1)*limit); r != wantLeft {
				t.Errorf("limit %d, page %d: remaining %d, want %d", limit, i, r, wantLeft)
			}
		}
	}
	keys, _ := pageAll(t, svc, "a-b", 1, nil, nil)
	if !slices.Equal(keys, []string{"a-b/a", "a-b/c"}) {
		t.Errorf("namespace a-b lists %v", keys)
	}

	// A selector's rejects do not count towards the limit, and the
	// estimate is unknown.
	match := func(sb *agentsv1beta1.Sandbox) bool { return sb.Name != "a" }
	var after sandbox.ClaimRef
	var got []string
	for {
		res, err := svc.ListPage(context.Background(), "", registry.ListOptions{After: after, Limit: 2, Match: match})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range res.Items {
			got = append(got, sb.Namespace+"/"+sb.Name)
		}
		if res.Next == (sandbox.ClaimRef{}) {
			break
		}
		if res.Remaining != -1 || len(res.Items) != 2 {
			t.Fatalf("a selected page holds %d items and estimates %d remaining", len(res.Items), res.Remaining)
		}
		after = res.Next
	}
	if wantSel := []string{"a/b", "a/c", "a/z", "a-b/c", "b/x"}; !slices.Equal(got, wantSel) {
		t.Errorf("selected paging lists %v, want %v", got, wantSel)
	}

	if _, err := svc.ListPage(context.Background(), "", registry.ListOptions{Limit: -1}); err == nil {
		t.Error("a negative limit is accepted")
	}
}

// TestListPageAcrossChangingFleet pages while nodes claim and release
// sandboxes between pages, and checks the guarantee ListOptions states:
// no sandbox twice, order kept, and every sandbox that existed for the
// whole paging listed exactly once.
func TestListPageAcrossChangingFleet(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			svc, h, clk := storeOnly(t, Config{})
			rng := rand.New(rand.NewPCG(seed, 17))
			const nodes = 3
			live := map[string]v1beta1.InventoryEntry{} // by ref
			nodeOf := map[string]int{}
			serial := 0
			add := func() {
				serial++
				ref := fmt.Sprintf("ns%d/sb-%04d", rng.IntN(3), rng.IntN(10000))
				if _, ok := live[ref]; ok {
					return
				}
				live[ref] = invEntry(ref, fmt.Sprintf("sb_c%06d", serial), v1beta1.SandboxPhaseRunning)
				nodeOf[ref] = rng.IntN(nodes)
			}
			publish := func() {
				clk.Step(1)
				per := make([][]v1beta1.InventoryEntry, nodes)
				for ref, e := range live {
					per[nodeOf[ref]] = append(per[nodeOf[ref]], e)
				}
				for n := range nodes {
					h.Publish(nodeInv(fmt.Sprintf("node-%d", n), t0, per[n]...))
				}
				h.Eventually("the publish to be listed", func() bool {
					l, _, _ := svc.List(context.Background(), "")
					return len(l) == len(live)
				})
			}
			for range 150 {
				add()
			}
			publish()
			stable := map[string]bool{}
			for ref := range live {
				stable[ref] = true
			}
			keys, _ := pageAll(t, svc, "", 1+rng.IntN(12), nil, func(int) {
				for ref := range live {
					if rng.IntN(10) == 0 {
						delete(live, ref)
						delete(stable, ref)
					}
				}
				for range rng.IntN(15) {
					add()
				}
				publish()
			})
			seen := map[string]int{}
			for i, k := range keys {
				seen[k]++
				if i > 0 {
					prev, cur := refEntry(keys[i-1]), refEntry(k)
					if inventory.CompareKeys(prev, cur) >= 0 {
						t.Fatalf("%s listed after %s", k, keys[i-1])
					}
				}
			}
			for ref := range stable {
				if seen[ref] != 1 {
					t.Errorf("%s existed throughout and was listed %d times", ref, seen[ref])
				}
			}
		})
	}
}

func refEntry(key string) inventory.Entry {
	ref, ok := sandbox.ParseClaimRef(key)
	if !ok {
		panic("not a claim reference: " + key)
	}
	return inventory.Entry{Namespace: ref.Namespace, ObjectName: ref.Name}
}

// TestListPageMergesRecentWrites pages over this replica's recent writes
// that the inventory does not show yet: a create appears in its place, a
// release hides the entry, and neither is listed twice.
func TestListPageMergesRecentWrites(t *testing.T) {
	svc, h, _ := storeOnly(t, Config{})
	var entries []v1beta1.InventoryEntry
	for i, ref := range []string{"ns/a", "ns/c", "ns/e", "ns/g"} {
		entries = append(entries, invEntry(ref, fmt.Sprintf("sb_m%02d", i), v1beta1.SandboxPhaseRunning))
	}
	h.Publish(nodeInv("node-1", t0, entries...))
	h.Eventually("four sandboxes listed", func() bool { l, _, _ := svc.List(context.Background(), ""); return len(l) == 4 })

	created := inventory.Entry{Node: "node-1", Address: "127.0.0.1:1", Name: "ns/d", ID: "sb_m99", Namespace: "ns", ObjectName: "d", Phase: v1beta1.SandboxPhaseRunning, Deadline: t0.Add(time.Hour)}
	svc.remember(view{entry: created}, false)
	released, ok := h.Store.ByClaimRef("ns", "e")
	if !ok {
		t.Fatal("ns/e is not in the inventory")
	}
	svc.remember(view{entry: released}, true)

	want := []string{"ns/a", "ns/c", "ns/d", "ns/g"}
	for _, limit := range []int{0, 1, 2, 3} {
		if keys, _ := pageAll(t, svc, "ns", limit, nil, nil); !slices.Equal(keys, want) {
			t.Errorf("limit %d lists %v, want %v", limit, keys, want)
		}
	}
}
