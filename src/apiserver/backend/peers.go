package backend

import (
	"encoding/json"
	"time"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/peerwrites"
)

// writeOf is a write of this replica as its peers receive it.
func writeOf(v view, deleted bool, at time.Time) peerwrites.Write {
	w := peerwrites.Write{Deleted: deleted, At: at, Entry: peerwrites.EntryOf(&v.entry)}
	if v.obj != nil && !deleted {
		if raw, err := json.Marshal(v.obj); err == nil {
			w.Object = raw
		}
	}
	return w
}

// ApplyPeerWrites lays writes another replica made over this replica's
// view, as that replica laid them over its own: until the inventory shows
// them or RecentTTL passes. A write is taken only when it names a node the
// inventory lists at that address (a peer cannot point a sandbox
// elsewhere), and only when it is newer than what this replica already
// shows for the sandbox; a released sandbox never comes back.
func (s *Service) ApplyPeerWrites(ws []peerwrites.Write) {
	addrs := map[string]string{}
	for _, n := range s.inv.Nodes() {
		addrs[n.Name] = n.Address
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range ws {
		e, ok := w.Entry.Inventory()
		if !ok || addrs[e.Node] == "" || addrs[e.Node] != e.Address {
			s.cfg.Logger.Debug("Ignored a peer's write of a sandbox on no node the inventory lists", "node", w.Entry.Node)
			continue
		}
		key := e.Key()
		if _, gone := s.released[e.ID]; gone && !w.Deleted {
			continue
		}
		if cur := s.overlays[key]; cur != nil && cur.entry.ID == e.ID && cur.at.After(w.At) {
			continue
		}
		v := view{entry: e}
		if len(w.Object) > 0 && !w.Deleted {
			var obj agentsv1beta1.Sandbox
			if err := json.Unmarshal(w.Object, &obj); err == nil && obj.Namespace == e.Namespace && obj.Name == e.ObjectName {
				v.obj = &obj
			}
		}
		s.overlayLocked(v, w.Deleted, w.At)
	}
}
