package peerwrites

import (
	"encoding/json"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Write is one write a replica made on a node, as peers receive it: the
// sandbox as the node will publish it, or (Deleted) the sandbox the node
// released.
type Write struct {
	Deleted bool `json:"deleted,omitempty"`
	// At is when the writing replica made the write. A peer keeps the
	// newest write of each sandbox, so writes of one sandbox made through
	// different replicas settle on the last one whatever order they
	// arrive in.
	At    time.Time `json:"at"`
	Entry Entry     `json:"entry"`
	// Object is the Sandbox object a create through the Sandbox API
	// answered with, so peers serve the same object; empty otherwise.
	Object json.RawMessage `json:"object,omitempty"`
}

// Entry is an inventory.Entry on the wire.
type Entry struct {
	Node       string    `json:"node"`
	Address    string    `json:"address"`
	Name       string    `json:"name"`
	Phase      string    `json:"phase"`
	ID         string    `json:"id"`
	ClaimRef   string    `json:"claimRef,omitempty"`
	Template   string    `json:"template,omitempty"`
	Net        string    `json:"net,omitempty"`
	Size       string    `json:"size,omitempty"`
	Deadline   time.Time `json:"deadline,omitzero"`
	ClaimedAt  time.Time `json:"claimedAt,omitzero"`
	Namespace  string    `json:"namespace"`
	ObjectName string    `json:"objectName"`
}

// EntryOf is e on the wire.
func EntryOf(e *inventory.Entry) Entry {
	return Entry{
		Node: e.Node, Address: e.Address, Name: e.Name, Phase: string(e.Phase), ID: e.ID,
		ClaimRef: e.ClaimRef, Template: e.Template, Net: e.Net, Size: e.Size,
		Deadline: e.Deadline, ClaimedAt: e.ClaimedAt, Namespace: e.Namespace, ObjectName: e.ObjectName,
	}
}

// Inventory is the entry as the inventory holds it. ok is false when the
// entry does not name a sandbox of the Sandbox API: no canonical sandboxd
// id, no valid claim reference, a phase the inventory does not know, or
// no node address.
func (w Entry) Inventory() (inventory.Entry, bool) {
	id, ok := sandbox.CanonicalID(w.ID)
	if !ok || w.ID != id || w.Address == "" || w.Node == "" {
		return inventory.Entry{}, false
	}
	ref, err := sandbox.NewClaimRef(w.Namespace, w.ObjectName)
	if err != nil {
		return inventory.Entry{}, false
	}
	phase := v1beta1.SandboxPhase(w.Phase)
	if phase != v1beta1.SandboxPhaseRunning && phase != v1beta1.SandboxPhaseHibernated {
		return inventory.Entry{}, false
	}
	dns, _ := sandbox.DNSID(id)
	return inventory.Entry{
		Node: w.Node, Address: w.Address, Name: ref.String(), Phase: phase, ID: id, DNSID: dns,
		ClaimRef: ref.String(), Template: w.Template, Net: w.Net, Size: w.Size,
		Deadline: w.Deadline, ClaimedAt: w.ClaimedAt, Namespace: ref.Namespace, ObjectName: ref.Name,
	}, true
}
