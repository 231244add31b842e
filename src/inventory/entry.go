package inventory

import (
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Node is one fresh node as its last inventory describes it.
type Node struct {
	Name string
	// Address is the node's sandboxd host:port; empty when the publisher
	// has none, and such a node takes no claims.
	Address string
	// PublishedAt is zero when the inventory carries no stamp (which only
	// happens in a fleet where no node stamps one).
	PublishedAt time.Time
	Pools       []Pool
	// Entries is how many sandboxes the node holds.
	Entries int
	// Fresh is whether the node is within the freshness window. Only
	// Known answers stale nodes; every other read answers fresh ones.
	Fresh bool
}

// Pool is the warm capacity of one pool on one node.
type Pool struct {
	Template, Net, Size string
	Warm, Target        int32
}

// Entry is one sandbox a fresh node holds.
type Entry struct {
	// Node is the node that published the entry.
	Node string
	// Address is where the sandbox's node answers: the claim's owner_addr
	// when the publisher recorded one, the node's address otherwise.
	Address string

	// Name is the entry's name as published: the claim reference, or the
	// sandboxd id for a claim made without one.
	Name  string
	Phase v1beta1.SandboxPhase
	// ID is the sandboxd spelling ("sb_…"); DNSID the DNS-safe one.
	ID, DNSID string
	ClaimRef  string
	Template  string
	// Net and Size complete the pool key with Template; empty when the
	// publisher does not say.
	Net, Size string
	Deadline  time.Time
	ClaimedAt time.Time

	// Namespace and ObjectName place the entry in the Sandbox API; both
	// are empty when the entry has no usable claim reference, and then it
	// is a sandbox of no namespace.
	Namespace, ObjectName string
}

// Key is "<namespace>/<object name>", the entry's address in the Sandbox
// API, or "" for an entry of no namespace.
func (e *Entry) Key() string {
	if e.Namespace == "" {
		return ""
	}
	return e.Namespace + "/" + e.ObjectName
}

// Same reports whether two entries describe the same sandbox in the same
// state, so an unchanged republish is not a change.
func (e *Entry) Same(o *Entry) bool {
	return e.Node == o.Node && e.Address == o.Address && e.Name == o.Name &&
		e.Phase == o.Phase && e.ID == o.ID && e.ClaimRef == o.ClaimRef &&
		e.Template == o.Template && e.Net == o.Net && e.Size == o.Size && e.Deadline.Equal(o.Deadline) &&
		e.ClaimedAt.Equal(o.ClaimedAt)
}

// newEntry converts one published entry of node.
func newEntry(node, nodeAddr string, in *v1beta1.InventoryEntry) *Entry {
	e := &Entry{
		Node:     node,
		Address:  in.Addr,
		Name:     in.Name,
		Phase:    in.Phase,
		ID:       in.ID,
		ClaimRef: in.ClaimRef,
		Template: in.Template,
		Net:      in.Net,
		Size:     in.Size,
	}
	if e.Address == "" {
		e.Address = nodeAddr
	}
	if e.ID == "" && sandbox.ValidID(in.Name) {
		e.ID = in.Name
	}
	if id, ok := sandbox.CanonicalID(e.ID); ok {
		e.ID = id
		e.DNSID, _ = sandbox.DNSID(id)
	} else {
		e.ID = "" // not a sandboxd id: nothing may be addressed with it
	}
	if in.Deadline != nil {
		e.Deadline = in.Deadline.Time
	}
	if in.ClaimedAt != nil {
		e.ClaimedAt = in.ClaimedAt.Time
	}
	ref := in.ClaimRef
	if ref == "" && strings.Contains(in.Name, "/") {
		// A publisher that fills only name still names the claim ref there.
		ref = in.Name
	}
	if ref != "" {
		if r, ok := sandbox.ParseClaimRef(ref); ok {
			e.Namespace, e.ObjectName = r.Namespace, r.Name
		}
	}
	return e
}
