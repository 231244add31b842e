package inventory

import (
	"encoding/json"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// FuzzInventoryEntry feeds arbitrary NodeInventory entries (what any node,
// or anyone who can write the CRD, publishes) to the conversion every read
// goes through: it never panics, an id it keeps is valid and canonical, and
// an entry it places in the Sandbox API has a claim reference that parses
// to that place.
func FuzzInventoryEntry(f *testing.F) {
	for _, s := range []string{
		`{"name":"ns/a","phase":"Running","id":"sb_0123","claimRef":"ns/a","addr":"10.0.0.1:9000","template":"base","net":"none","size":"small"}`,
		`{"name":"sb_0123","phase":"Hibernated"}`,
		`{"name":"ns/a_b","phase":"Running","id":"sb-0123"}`,
		`{"name":"a/b/c","phase":"x","id":"../x"}`,
		`{"name":"","phase":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in v1beta1.InventoryEntry
		if json.Unmarshal(data, &in) != nil {
			return
		}
		e := newEntry("node-a", "127.0.0.1:1", &in)
		if e.ID != "" {
			if c, ok := sandbox.CanonicalID(e.ID); !ok || c != e.ID {
				t.Fatalf("entry %q keeps id %q, which is not canonical", data, e.ID)
			}
		}
		if e.Address == "" {
			t.Fatalf("entry %q has no address", data)
		}
		if e.Namespace != "" {
			ref, ok := sandbox.ParseClaimRef(e.Key())
			if !ok || ref.Namespace != e.Namespace || ref.Name != e.ObjectName {
				t.Fatalf("entry %q is placed at %q, which does not parse back", data, e.Key())
			}
		}
	})
}
