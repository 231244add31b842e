package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeInventory summarizes one sandbox node: where its sandboxd listens, how
// much warm capacity each of its pools holds, and which sandboxes it serves.
//
// The node's agent (vk-sandbox in a real cluster, the sandboxd simulator in
// tests) owns the object and replaces it wholesale by server-side apply on a
// fixed cadence; readers watch it through an informer. The object is named
// after the node and carries no spec/status split because nobody but the
// publisher writes it: the whole object is observed state.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=nodeinventories,singular=nodeinventory
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.node`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.address`
// +kubebuilder:printcolumn:name="Published",type=date,JSONPath=`.publishedAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// node is the name of the Kubernetes node this inventory describes; the
	// object's own name is the same.
	// +required
	// +kubebuilder:validation:MinLength=1
	Node string `json:"node"`

	// address is the node's sandboxd advertise address (host:port), the
	// endpoint claims and lifecycle calls for this node are sent to. Empty
	// when the publisher has no sandboxd address configured; such a node
	// takes no claims.
	// +optional
	Address string `json:"address,omitempty"`

	// publishedAt is when the publisher last built this inventory. Readers
	// judge freshness by comparing it with the newest publish in the fleet;
	// an inventory without it counts as stale.
	// +optional
	PublishedAt *metav1.Time `json:"publishedAt,omitempty"`

	// pools is the node's warm-pool capacity, one item per (template, net,
	// size) pool sandboxd keeps.
	// +optional
	// +listType=atomic
	Pools []PoolCapacity `json:"pools,omitempty"`

	// entries lists the sandboxes the node currently holds, sorted by name.
	// +optional
	// +listType=atomic
	Entries []InventoryEntry `json:"entries,omitempty"`
}

// PoolCapacity is the warm capacity of one sandboxd pool, identified by the
// (template, net, size) key sandboxd uses for pools.
type PoolCapacity struct {
	// template is the sandbox template the pool boots.
	// +optional
	Template string `json:"template,omitempty"`

	// net is the pool's network lane (for example "none").
	// +optional
	Net string `json:"net,omitempty"`

	// size is the pool's machine size (for example "small").
	// +optional
	Size string `json:"size,omitempty"`

	// warm is the number of booted, unclaimed sandboxes ready to hand out.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Warm int32 `json:"warm,omitempty"`

	// target is the warm count sandboxd refills the pool towards.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Target int32 `json:"target,omitempty"`
}

// InventoryEntry is one sandbox a node holds.
type InventoryEntry struct {
	// name identifies the sandbox to readers: the claim reference
	// "<namespace>/<name>" it was claimed under, or its sandboxd id when it
	// was claimed without one.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// phase is the sandbox's lifecycle phase as the node last saw it.
	// +required
	// +kubebuilder:validation:MinLength=1
	Phase SandboxPhase `json:"phase"`

	// id is sandboxd's claim id ("sb_..."), the handle the node's release
	// and lifecycle verbs take.
	// +optional
	ID string `json:"id,omitempty"`

	// claimRef is the "<namespace>/<name>" reference the sandbox was
	// claimed under; empty for a claim made without one.
	// +optional
	ClaimRef string `json:"claimRef,omitempty"`

	// addr is the sandboxd address (host:port) that answered the claim, as
	// sandboxd reported it in owner_addr, when the publisher recorded one.
	// Readers fall back to the inventory's address when it is empty.
	// +optional
	Addr string `json:"addr,omitempty"`

	// template is the sandbox template the sandbox was booted from.
	// +optional
	Template string `json:"template,omitempty"`

	// net is the network lane of the pool the sandbox was claimed from
	// ("none", "egress", ...), so readers can tell what the sandbox may do
	// (an egress-lane sandbox stays live: no hibernate, fork or checkpoint).
	// +optional
	Net string `json:"net,omitempty"`

	// size is the size tier of the pool the sandbox was claimed from.
	// +optional
	Size string `json:"size,omitempty"`

	// deadline is when the sandbox's lease ends.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`

	// claimedAt is when the sandbox was first handed out.
	// +optional
	ClaimedAt *metav1.Time `json:"claimedAt,omitempty"`
}

// SandboxPhase is the lifecycle phase of a sandbox in a NodeInventory entry.
//
// The CRD deliberately does not restrict it to an enum: an apply carrying a
// phase this CRD version does not know would be rejected as a whole, and the
// node would then drop out of every read and claim path. Readers treat an
// unknown phase as not running.
type SandboxPhase string

const (
	// SandboxPhaseRunning is a claimed sandbox whose microVM is up.
	SandboxPhaseRunning SandboxPhase = "Running"
	// SandboxPhaseHibernated is a claimed sandbox whose microVM is suspended;
	// the node wakes it on the next call that needs it.
	SandboxPhaseHibernated SandboxPhase = "Hibernated"
	// SandboxPhaseFailed is a claimed sandbox whose VMM is down and was not
	// restarted (sandboxd's failed): it stays claimed until it is woken
	// (booted again from its disk, memory lost), released or reaped.
	SandboxPhaseFailed SandboxPhase = "Failed"
)

// NodeInventoryList is a list of NodeInventory objects.
//
// +kubebuilder:object:root=true
type NodeInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NodeInventory `json:"items"`
}
