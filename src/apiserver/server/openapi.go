package server

import (
	"strings"

	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api"
)

// definitionNamer names OpenAPI definitions the way Kubernetes clients
// expect ("io.k8s.sigs.agent-sandbox.api.v1beta1.Sandbox", with the
// x-kubernetes-group-version-kind extension that kubectl explain and the
// server-side-apply type converter key on).
//
// Kubernetes' own types carry an OpenAPIModelName method, so their generated
// definitions already use that form. The upstream Sandbox types and the
// subresource kinds do not, so their definitions are keyed by Go import path
// ("sigs.k8s.io/agent-sandbox/api/v1beta1.Sandbox"), which the scheme-based
// namer does not recognise. Rewriting such a name into the scheme's form
// before the lookup makes the two agree.
func definitionNamer() func(string) (string, spec.Extensions) {
	namer := openapinamer.NewDefinitionNamer(api.Scheme)
	return func(name string) (string, spec.Extensions) {
		return namer.GetDefinitionName(restFriendlyName(name))
	}
}

// v3Ref resolves a definition reference in an OpenAPI v3 document.
func v3Ref(name func(string) (string, spec.Extensions)) common.ReferenceCallback {
	return func(path string) spec.Ref {
		defName, _ := name(path)
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(defName))
	}
}

// restFriendlyName turns "example.com/a/b.Kind" into "com.example.a.b.Kind",
// as runtime.Scheme.ToOpenAPIDefinitionName does for a type without a model
// name; names without a path are already in that form.
func restFriendlyName(name string) string {
	if !strings.Contains(name, "/") {
		return name
	}
	parts := strings.Split(name, "/")
	if strings.Contains(parts[0], ".") {
		domain := strings.Split(parts[0], ".")
		for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
			domain[i], domain[j] = domain[j], domain[i]
		}
		parts[0] = strings.Join(domain, ".")
	}
	return strings.Join(parts, ".")
}
