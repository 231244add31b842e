// Package certmanager_test checks the chart's cert-manager objects against a
// real API server. The cluster install test runs with
// certManager.enabled=false (nothing there issues certificates), so the
// Issuer/Certificate chain of the default render is proven here instead:
// a kube-apiserver with cert-manager's own CRDs installed (copied from the
// cert-manager Go module by tools/cert-manager-crds.sh) must accept every
// cert-manager object of the render in a server-side dry run, with strict
// field validation, and must refuse broken variants of them.
//
// Nothing runs cert-manager's controllers or webhook: what is proven is the
// schema (field names, types, enums, required fields) the CRDs enforce, not
// that cert-manager would issue the certificates.
package certmanager_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cocoonstack/sandbox-operator/tests/chartrender"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	certmanagercrds "github.com/cocoonstack/sandbox-operator/tests/testdata/cert-manager-crds"
)

// releaseNamespace is the namespace the chart is rendered for: one no
// template could hard-code, so an object landing elsewhere shows.
const releaseNamespace = "sandbox-certmanager-test"

// certManagerGroup is the API group of the objects under test.
const certManagerGroup = "cert-manager.io"

// testTimeout bounds the test once the cluster runs (its start has a
// deadline of its own); generous for a loaded two-core machine.
const testTimeout = 2 * time.Minute

func TestDefaultRenderCertManagerObjectsAccepted(t *testing.T) {
	objs := certManagerObjects(t, chartrender.Render(t, releaseNamespace, nil))
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetNamespace() != releaseNamespace {
			t.Errorf("%s %s rendered in namespace %q, want the release namespace %q",
				o.GetKind(), o.GetName(), o.GetNamespace(), releaseNamespace)
		}
	}
	// The default render is the cert-manager path; a render without these
	// would make the rest of the test vacuous.
	if kinds["Issuer"] == 0 || kinds["Certificate"] == 0 {
		t.Fatalf("default render has cert-manager kinds %v, want at least one Issuer and one Certificate", kinds)
	}

	// Locating (under go test: building) the kube-apiserver happens before
	// the cluster's start-up deadline begins; a first build takes minutes.
	if _, err := cluster.APIServerBinary(); err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	c := cluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)

	t.Logf("installing cert-manager CRDs from %s", certmanagercrds.Version())
	if err := c.InstallCRDs(ctx, certmanagercrds.Manifests()...); err != nil {
		t.Fatalf("install cert-manager CRDs: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}
	if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", releaseNamespace, err)
	}

	for _, o := range objs {
		t.Run("Accepts/"+o.GetKind()+"/"+o.GetName(), func(t *testing.T) {
			requireNamespaced(ctx, t, c, o)
			got, err := c.DryRunCreate(ctx, o)
			if err != nil {
				t.Fatalf("server-side dry run of %s %s/%s refused:\n%v\n%s", o.GetKind(), o.GetNamespace(), o.GetName(), err, chartrender.YAML(o))
			}
			if got.GetName() != o.GetName() || got.GetNamespace() != o.GetNamespace() {
				t.Errorf("dry run answered %s/%s, want %s/%s", got.GetNamespace(), got.GetName(), o.GetNamespace(), o.GetName())
			}
			// A dry run persists nothing.
			res, err := c.Resource(ctx, o.GroupVersionKind(), o.GetNamespace())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := res.Get(ctx, o.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get %s %s after the dry run: %v, want NotFound", o.GetKind(), o.GetName(), err)
			}
		})
	}

	// The same server refuses broken variants of the rendered objects, so
	// the acceptance above is the schema's verdict and not a server that
	// takes anything.
	for _, tc := range []struct {
		name   string
		kind   string
		breaks func(*unstructured.Unstructured) error
		// refused says whether err is the expected refusal.
		refused func(error) bool
		// mentions is a field path the refusal must name.
		mentions string
	}{
		{
			name:     "BooleanAsString",
			kind:     "Certificate",
			breaks:   set("yes", "spec", "isCA"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.isCA",
		},
		{
			name:     "DurationAsNumber",
			kind:     "Certificate",
			breaks:   set(int64(87600), "spec", "duration"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.duration",
		},
		{
			name:     "KeyAlgorithmOutsideEnum",
			kind:     "Certificate",
			breaks:   set("DSA", "spec", "privateKey", "algorithm"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.privateKey.algorithm",
		},
		{
			name:     "MissingIssuerRef",
			kind:     "Certificate",
			breaks:   remove("spec", "issuerRef"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.issuerRef",
		},
		{
			name:     "MisspeltField",
			kind:     "Issuer",
			breaks:   set(map[string]any{}, "spec", "selfSinged"),
			refused:  apierrors.IsBadRequest,
			mentions: "selfSinged",
		},
	} {
		t.Run("Refuses/"+tc.kind+"/"+tc.name, func(t *testing.T) {
			o := chartrender.Find(t, objs, tc.kind).DeepCopy()
			if err := tc.breaks(o); err != nil {
				t.Fatalf("breaking %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			requireNamespaced(ctx, t, c, o)
			_, err := c.DryRunCreate(ctx, o)
			if err == nil {
				t.Fatalf("server accepted the broken %s %s:\n%s", o.GetKind(), o.GetName(), chartrender.YAML(o))
			}
			t.Logf("refused: %v", err)
			if !tc.refused(err) || !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("refusal %q (reason %s), want one of the expected kind naming %q",
					err, apierrors.ReasonForError(err), tc.mentions)
			}
		})
	}
}

// certManagerObjects keeps the objects of the cert-manager.io group.
func certManagerObjects(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().Group == certManagerGroup {
			out = append(out, o)
		}
	}
	return out
}

// requireNamespaced fails the test unless the server serves o's kind, as
// a namespaced resource: every cert-manager object of the render is meant
// to live in the release namespace.
func requireNamespaced(ctx context.Context, t *testing.T, c *cluster.Cluster, o *unstructured.Unstructured) {
	t.Helper()
	gvk := o.GroupVersionKind()
	mapping, err := c.ServedRESTMapping(ctx, gvk)
	if err != nil {
		t.Fatalf("the API server serves no %s (is its CRD in tests/testdata/cert-manager-crds?): %v", gvk, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("%s is not namespaced on the server", gvk)
	}
}

// set returns a change that puts value at the field path.
func set(value any, path ...string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		return unstructured.SetNestedField(o.Object, value, path...)
	}
}

// remove returns a change that deletes the field path, which must exist.
func remove(path ...string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		if _, found, err := unstructured.NestedFieldNoCopy(o.Object, path...); err != nil || !found {
			return errors.Join(err, fmt.Errorf("no field %s", strings.Join(path, ".")))
		}
		unstructured.RemoveNestedField(o.Object, path...)
		return nil
	}
}
