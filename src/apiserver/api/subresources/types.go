package subresources

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// SandboxPauseOptions is the body of POST .../sandboxes/{name}/pause, which
// hibernates the sandbox. Pausing a paused sandbox is not an error.
// The response is the Sandbox as the owning node reports it afterwards.
//
// +kubebuilder:object:root=true
type SandboxPauseOptions struct {
	metav1.TypeMeta `json:",inline"`
}

// SandboxResumeOptions is the body of POST .../sandboxes/{name}/resume, which
// wakes a paused sandbox. Resuming a running sandbox is not an error.
// The response is the Sandbox as the owning node reports it afterwards.
//
// +kubebuilder:object:root=true
type SandboxResumeOptions struct {
	metav1.TypeMeta `json:",inline"`
}

// SandboxForkOptions is the body of POST .../sandboxes/{name}/fork, which
// makes copies of a running sandbox on its node. The response is a
// SandboxForkResult.
//
// +kubebuilder:object:root=true
type SandboxForkOptions struct {
	metav1.TypeMeta `json:",inline"`

	// count is how many children to make; 0 means 1.
	// +optional
	Count int32 `json:"count,omitempty"`

	// ttlSeconds is the lease of each child in seconds; 0 takes the node's
	// default lease.
	// +optional
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
}

// SandboxSnapshotOptions is the body of POST .../sandboxes/{name}/snapshot,
// which checkpoints a sandbox on its node. The response is a SandboxSnapshot.
//
// +kubebuilder:object:root=true
type SandboxSnapshotOptions struct {
	metav1.TypeMeta `json:",inline"`

	// name labels the checkpoint; empty leaves it unnamed.
	// +optional
	Name string `json:"name,omitempty"`
}

// SandboxForkResult answers a fork with the children it made.
//
// +kubebuilder:object:root=true
type SandboxForkResult struct {
	metav1.TypeMeta `json:",inline"`

	// parent is the name of the forked sandbox.
	Parent string `json:"parent"`

	// children are the new sandboxes, in the parent's namespace.
	// +listType=atomic
	Children []agentsv1beta1.Sandbox `json:"children"`
}

// SandboxSnapshot answers a snapshot with the checkpoint the node took.
//
// +kubebuilder:object:root=true
type SandboxSnapshot struct {
	metav1.TypeMeta `json:",inline"`

	// sandbox is the name of the checkpointed sandbox.
	Sandbox string `json:"sandbox"`

	// id is the node's checkpoint id.
	ID string `json:"id"`

	// name is the name the checkpoint was asked for, if any.
	// +optional
	Name string `json:"name,omitempty"`

	// node is the node that holds the checkpoint.
	// +optional
	Node string `json:"node,omitempty"`

	// createdAt is when the checkpoint was taken, in RFC 3339.
	// +optional
	CreatedAt string `json:"createdAt,omitempty"`
}
