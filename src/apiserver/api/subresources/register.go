package subresources

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// Kinds of this package, as served in agents.x-k8s.io/v1beta1.
const (
	PauseOptionsKind    = "SandboxPauseOptions"
	ResumeOptionsKind   = "SandboxResumeOptions"
	ForkOptionsKind     = "SandboxForkOptions"
	SnapshotOptionsKind = "SandboxSnapshotOptions"
	ForkResultKind      = "SandboxForkResult"
	SnapshotKind        = "SandboxSnapshot"
)

var (
	// SchemeGroupVersion is the upstream Sandbox group version: the
	// subresource kinds are served next to Sandbox, not in a group of their own.
	SchemeGroupVersion = agentsv1beta1.GroupVersion

	// SchemeBuilder collects the functions that register this package's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers this package's kinds in agents.x-k8s.io/v1beta1.
	AddToScheme = SchemeBuilder.AddToScheme
)

// KnownTypes returns a fresh instance of every kind in this package; the
// server registers them under both the external and the internal version.
func KnownTypes() []runtime.Object {
	return []runtime.Object{
		&SandboxPauseOptions{},
		&SandboxResumeOptions{},
		&SandboxForkOptions{},
		&SandboxSnapshotOptions{},
		&SandboxForkResult{},
		&SandboxSnapshot{},
	}
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, KnownTypes()...)
	return nil
}

// Kind qualifies a kind of this package with its group version.
func Kind(kind string) schema.GroupVersionKind {
	return SchemeGroupVersion.WithKind(kind)
}
