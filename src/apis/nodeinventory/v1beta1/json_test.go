package v1beta1_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
)

func mustTime(t *testing.T, s string) *metav1.Time {
	t.Helper()
	parsed, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	mt := metav1.NewTime(parsed)
	return &mt
}

func sortedKeys(t *testing.T, raw any) []string {
	t.Helper()
	m, ok := raw.(map[string]any)
	if !ok {
		t.Fatalf("%v is not a JSON object", raw)
	}
	return slices.Sorted(maps.Keys(m))
}

// TestNodeInventoryJSONNames pins the wire names every publisher and reader
// agrees on; renaming a json tag breaks interoperability with vk-sandbox.
func TestNodeInventoryJSONNames(t *testing.T) {
	inv := v1beta1.NodeInventory{
		TypeMeta:    metav1.TypeMeta{APIVersion: v1beta1.SchemeGroupVersion.String(), Kind: v1beta1.NodeInventoryKind},
		ObjectMeta:  metav1.ObjectMeta{Name: "node-a"},
		Node:        "node-a",
		Address:     "10.0.0.1:7777",
		PublishedAt: mustTime(t, "2026-03-01T10:00:30Z"),
		Pools: []v1beta1.PoolCapacity{
			{Template: "python", Net: "none", Size: "small", Warm: 3, Target: 5},
		},
		Entries: []v1beta1.InventoryEntry{{
			Name:      "team-a/agent-1",
			Phase:     v1beta1.SandboxPhaseHibernated,
			ID:        "sb_0123abcd",
			ClaimRef:  "team-a/agent-1",
			Addr:      "10.0.0.2:7777",
			Template:  "python",
			Deadline:  mustTime(t, "2026-03-02T10:00:00Z"),
			ClaimedAt: mustTime(t, "2026-03-01T10:00:00Z"),
		}},
	}
	data, err := json.Marshal(&inv)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}

	wantTop := []string{"address", "apiVersion", "entries", "kind", "metadata", "node", "pools", "publishedAt"}
	if got := sortedKeys(t, generic); !slices.Equal(got, wantTop) {
		t.Errorf("top-level keys = %v, want %v", got, wantTop)
	}
	wantPool := []string{"net", "size", "target", "template", "warm"}
	if got := sortedKeys(t, generic["pools"].([]any)[0]); !slices.Equal(got, wantPool) {
		t.Errorf("pool keys = %v, want %v", got, wantPool)
	}
	wantEntry := []string{"addr", "claimRef", "claimedAt", "deadline", "id", "name", "phase", "template"}
	entry := generic["entries"].([]any)[0].(map[string]any)
	if got := sortedKeys(t, entry); !slices.Equal(got, wantEntry) {
		t.Errorf("entry keys = %v, want %v", got, wantEntry)
	}
	if entry["phase"] != "Hibernated" || entry["deadline"] != "2026-03-02T10:00:00Z" {
		t.Errorf("entry phase/deadline = %v/%v, want Hibernated/2026-03-02T10:00:00Z", entry["phase"], entry["deadline"])
	}
	if generic["publishedAt"] != "2026-03-01T10:00:30Z" {
		t.Errorf("publishedAt = %v, want RFC 3339 UTC", generic["publishedAt"])
	}
	if warm := generic["pools"].([]any)[0].(map[string]any)["warm"]; warm != float64(3) {
		t.Errorf("pool warm = %v, want the number 3", warm)
	}

	var back v1beta1.NodeInventory
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&inv, &back) {
		t.Errorf("round trip changed the object:\n got %+v\nwant %+v", back, inv)
	}
}

// TestNodeInventoryOptionalFieldsOmitted checks that an inventory carrying
// only the required fields writes nothing else, so a publisher that does not
// know a field never clears it by sending an empty value.
func TestNodeInventoryOptionalFieldsOmitted(t *testing.T) {
	inv := v1beta1.NodeInventory{
		Node:    "node-b",
		Entries: []v1beta1.InventoryEntry{{Name: "sb_1", Phase: v1beta1.SandboxPhaseRunning}},
		Pools:   []v1beta1.PoolCapacity{{}},
	}
	data, err := json.Marshal(&inv)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"address", "publishedAt", "apiVersion", "kind"} {
		if _, ok := generic[key]; ok {
			t.Errorf("empty %s was written: %s", key, data)
		}
	}
	if got := sortedKeys(t, generic["entries"].([]any)[0]); !slices.Equal(got, []string{"name", "phase"}) {
		t.Errorf("minimal entry keys = %v, want [name phase]", got)
	}
	if got := sortedKeys(t, generic["pools"].([]any)[0]); len(got) != 0 {
		t.Errorf("empty pool keys = %v, want none", got)
	}
}

// TestNodeInventoryDecodesPublishedShape decodes an inventory written by hand
// in the shape vk-sandbox applies, independent of this package's encoder.
func TestNodeInventoryDecodesPublishedShape(t *testing.T) {
	const published = `{
	  "apiVersion": "sandbox.cocoonstack.io/v1beta1",
	  "kind": "NodeInventory",
	  "metadata": {"name": "node-c"},
	  "node": "node-c",
	  "address": "192.0.2.7:7777",
	  "publishedAt": "2026-03-01T10:01:00Z",
	  "pools": [{"template": "base", "net": "none", "size": "small", "warm": 2, "target": 4}],
	  "entries": [
	    {"name": "sb_9", "id": "sb_9", "phase": "Running", "claimRef": "sb_9", "template": "base",
	     "deadline": "2026-03-02T00:00:00Z", "claimedAt": "2026-03-01T00:00:00Z"}
	  ]
	}`
	var inv v1beta1.NodeInventory
	if err := json.Unmarshal([]byte(published), &inv); err != nil {
		t.Fatal(err)
	}
	if inv.Name != "node-c" || inv.Node != "node-c" || inv.Address != "192.0.2.7:7777" {
		t.Errorf("identity = %q/%q/%q", inv.Name, inv.Node, inv.Address)
	}
	if inv.PublishedAt == nil || !inv.PublishedAt.Equal(mustTime(t, "2026-03-01T10:01:00Z")) {
		t.Errorf("publishedAt = %v", inv.PublishedAt)
	}
	wantPool := v1beta1.PoolCapacity{Template: "base", Net: "none", Size: "small", Warm: 2, Target: 4}
	if len(inv.Pools) != 1 || inv.Pools[0] != wantPool {
		t.Errorf("pools = %+v, want [%+v]", inv.Pools, wantPool)
	}
	if len(inv.Entries) != 1 {
		t.Fatalf("entries = %+v, want one", inv.Entries)
	}
	e := inv.Entries[0]
	if e.Phase != v1beta1.SandboxPhaseRunning || e.ID != "sb_9" || e.Deadline == nil || e.ClaimedAt == nil {
		t.Errorf("entry = %+v", e)
	}
}
