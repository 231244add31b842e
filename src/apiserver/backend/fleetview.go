package backend

import (
	"context"
	"errors"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// fleetView is the Service's view as the fleet core reads it: the
// NodeInventory store with this replica's recent writes laid over it. It
// also records the core's writes, so a sandbox the e2b front claims shows
// in kubectl get sandboxes (and its watches) at once, exactly like one
// created through the Kubernetes API.
type fleetView struct{ s *Service }

var (
	_ fleet.View     = fleetView{}
	_ fleet.Recorder = fleetView{}
)

// Nodes implements fleet.View: the fresh nodes that publish an address.
func (v fleetView) Nodes() []fleet.Node {
	var out []fleet.Node
	for _, n := range v.s.inv.Nodes() {
		if n.Address == "" {
			continue
		}
		fn := fleet.Node{Name: n.Name, Addr: n.Address, Warm: make(map[sandbox.PoolKey]int, len(n.Pools))}
		for _, p := range n.Pools {
			fn.Warm[sandbox.PoolKey{Template: p.Template, Net: p.Net, Size: p.Size}.WithDefaults()] += int(p.Warm)
		}
		out = append(out, fn)
	}
	return out
}

// List implements fleet.View.
func (v fleetView) List(_ context.Context, namespace string) ([]fleet.Sandbox, error) {
	l := v.s.read(namespace)
	out := make([]fleet.Sandbox, 0, len(l.entries)+len(l.overlays))
	l.walk(sandbox.ClaimRef{}, func(cur *view) bool {
		if e := &cur.entry; e.ID != "" && e.Address != "" {
			out = append(out, sandboxOf(e))
		}
		return true
	})
	return out, nil
}

// Find implements fleet.View: the inventory's id index names the object,
// whose current view includes the recent writes of this replica and its
// peers; a sandbox the inventory does not show yet is found among them,
// and one neither shows is asked of the nodes (see nodeLookup) and shown
// from then on, as the node will publish it.
func (v fleetView) Find(ctx context.Context, namespace, id string) (fleet.Sandbox, error) {
	sb, err := v.findInView(namespace, id)
	if !errors.Is(err, fleet.ErrNotFound) {
		return sb, err
	}
	sb, err = v.s.lookup.find(ctx, v.s, namespace, id)
	if err != nil {
		return fleet.Sandbox{}, err
	}
	v.s.mu.Lock()
	if _, gone := v.s.released[sb.ID]; gone {
		v.s.mu.Unlock()
		return fleet.Sandbox{}, fleet.ErrNotFound
	}
	if cur, ok := v.s.currentLocked(sb.ClaimRef.String()); !ok || cur.entry.ID != sb.ID {
		v.s.overlayLocked(view{entry: entryOf(sb)}, false, v.s.cfg.Clock.Now())
	}
	v.s.mu.Unlock()
	return sb, nil
}

// findInView is Find over the view alone.
func (v fleetView) findInView(namespace, id string) (fleet.Sandbox, error) {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.inv.ByID(id, namespace); ok && e.Namespace != "" {
		if cur, ok := s.currentLocked(e.Key()); ok && cur.entry.ID == id && cur.entry.Address != "" {
			return sandboxOf(&cur.entry), nil
		}
	}
	for key, ov := range s.overlays {
		if ov.deleted || ov.entry.ID != id || (namespace != "" && ov.entry.Namespace != namespace) {
			continue
		}
		if cur, ok := s.currentLocked(key); ok && cur.entry.ID == id {
			return sandboxOf(&cur.entry), nil
		}
	}
	return fleet.Sandbox{}, fleet.ErrNotFound
}

// Claimed implements fleet.Recorder. A create of this Service remembers
// its own object once the claim returns; any other claim (e2b, a fork
// child) is shown from the entry alone.
func (v fleetView) Claimed(sb fleet.Sandbox) {
	key := sb.ClaimRef.String()
	v.s.mu.Lock()
	_, creating := v.s.creating[key]
	v.s.mu.Unlock()
	if !creating {
		v.s.remember(view{entry: entryOf(sb)}, false)
	}
}

// Changed implements fleet.Recorder.
func (v fleetView) Changed(sb fleet.Sandbox) {
	if cur, ok := v.current(sb); ok {
		cur.entry.Phase = phaseOf(sb.Paused)
		if sb.Failed != "" {
			cur.entry.Phase = v1beta1.SandboxPhaseFailed
		}
		if !sb.Deadline.IsZero() {
			cur.entry.Deadline = sb.Deadline
		}
		v.s.remember(cur, false)
	}
}

// Released implements fleet.Recorder.
func (v fleetView) Released(sb fleet.Sandbox) {
	if cur, ok := v.current(sb); ok {
		v.s.remember(cur, true)
	}
}

// Unreachable implements fleet.Recorder; the inventory's freshness, not
// one failed call, decides which nodes are in the view.
func (fleetView) Unreachable(string, error) {}

// current is what sb's key shows now, if that is still sb.
func (v fleetView) current(sb fleet.Sandbox) (view, bool) {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	cur, ok := v.s.currentLocked(sb.ClaimRef.String())
	return cur, ok && cur.entry.ID == sb.ID
}

// sandboxOf is the fleet's view of an inventory entry.
func sandboxOf(e *inventory.Entry) fleet.Sandbox {
	return fleet.Sandbox{
		ID:        e.ID,
		ClaimRef:  sandbox.ClaimRef{Namespace: e.Namespace, Name: e.ObjectName},
		Key:       sandbox.PoolKey{Template: e.Template, Net: e.Net, Size: e.Size},
		Node:      e.Node,
		NodeAddr:  e.Address,
		ClaimedAt: e.ClaimedAt,
		Deadline:  e.Deadline,
		Paused:    e.Phase == v1beta1.SandboxPhaseHibernated,
		Failed:    failedOf(e.Phase),
	}
}

// entryOf is the inventory entry a node will publish for a claim.
func entryOf(sb fleet.Sandbox) inventory.Entry {
	ref := sb.ClaimRef.String()
	dns, _ := sandbox.DNSID(sb.ID)
	return inventory.Entry{
		Node: sb.Node, Address: sb.NodeAddr, Name: ref, Phase: phaseOf(sb.Paused),
		ID: sb.ID, DNSID: dns, ClaimRef: ref, Template: sb.Key.Template, Net: sb.Key.Net, Size: sb.Key.Size,
		Deadline: sb.Deadline, ClaimedAt: sb.ClaimedAt,
		Namespace: sb.Namespace, ObjectName: sb.Name,
	}
}

// failedOf is the fleet's Failed for an inventory phase: the inventory
// carries no reason, only that the VMM is down.
func failedOf(p v1beta1.SandboxPhase) string {
	if p == v1beta1.SandboxPhaseFailed {
		return "the node reports the VMM down"
	}
	return ""
}

func phaseOf(paused bool) v1beta1.SandboxPhase {
	if paused {
		return v1beta1.SandboxPhaseHibernated
	}
	return v1beta1.SandboxPhaseRunning
}
