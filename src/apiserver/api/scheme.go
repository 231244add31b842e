// Package api assembles the runtime scheme sandbox-apiserver serves: the
// upstream agents.x-k8s.io/v1beta1 Sandbox types, this project's subresource
// kinds, and the meta types every API group needs.
package api

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api/subresources"
)

var (
	// Scheme knows every kind the server decodes or encodes.
	Scheme = runtime.NewScheme()
	// Codecs serializes with Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
)

// GroupVersion is the one group version this server serves.
var GroupVersion = agentsv1beta1.GroupVersion

func init() {
	if err := Install(Scheme); err != nil {
		panic(fmt.Sprintf("building the sandbox-apiserver scheme: %v", err))
	}
}

// Install registers the served kinds in scheme.
//
// The generic apiserver decodes requests into the group's internal version
// and converts back on the way out. This server has no internal types of its
// own, so the external types are registered under the internal version too:
// conversion between the two is then the identity and the upstream Sandbox
// type stays the only shape of the object.
func Install(scheme *runtime.Scheme) error {
	if err := agentsv1beta1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("adding agents.x-k8s.io/v1beta1: %w", err)
	}
	if err := subresources.AddToScheme(scheme); err != nil {
		return fmt.Errorf("adding the sandbox subresource kinds: %w", err)
	}

	internal := schema.GroupVersion{Group: GroupVersion.Group, Version: runtime.APIVersionInternal}
	scheme.AddKnownTypes(internal, &agentsv1beta1.Sandbox{}, &agentsv1beta1.SandboxList{})
	scheme.AddKnownTypes(internal, subresources.KnownTypes()...)

	if err := scheme.SetVersionPriority(GroupVersion); err != nil {
		return fmt.Errorf("setting version priority: %w", err)
	}

	// The unversioned meta kinds (Status, APIGroup, ...) every server answers
	// with, as in any aggregated apiserver.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
	return nil
}
