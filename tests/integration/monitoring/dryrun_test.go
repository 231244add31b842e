package monitoring_test

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
	prometheusoperatorcrds "github.com/cocoonstack/sandbox-operator/tests/testdata/prometheus-operator-crds"
)

// monitoringGroup is the API group of prometheus-operator's kinds.
const monitoringGroup = "monitoring.coreos.com"

// dryRunTimeout bounds the test once the cluster runs (its start has a
// deadline of its own); generous for a loaded two-core machine.
const dryRunTimeout = 2 * time.Minute

// TestMonitoringObjectsAccepted dry-runs every object the monitoring values
// add (the prometheus-operator kinds, and the Kubernetes objects that go with
// them: the metrics Service, the metrics-reader RBAC, the dashboard
// ConfigMap) against a kube-apiserver that has prometheus-operator's CRDs.
func TestMonitoringObjectsAccepted(t *testing.T) {
	objs := monitoringObjects(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	// Without these the acceptance below would prove nothing about the
	// CRDs.
	if kinds["ServiceMonitor"] != 2 || kinds["PrometheusRule"] != 1 {
		t.Fatalf("a render with monitoring on has kinds %v, want two ServiceMonitors and a PrometheusRule", kinds)
	}

	// Locating (under go test: building) the kube-apiserver happens before
	// the cluster's start-up deadline begins; a first build takes minutes.
	if _, err := cluster.APIServerBinary(); err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	c := cluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), dryRunTimeout)
	t.Cleanup(cancel)

	t.Logf("installing prometheus-operator CRDs from %s", prometheusoperatorcrds.Version())
	if err := c.InstallCRDs(ctx, prometheusoperatorcrds.Manifests()...); err != nil {
		t.Fatalf("install prometheus-operator CRDs: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}
	if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", releaseNamespace, err)
	}

	for _, o := range objs {
		t.Run("Accepts/"+o.GetKind()+"/"+o.GetName(), func(t *testing.T) {
			requireServed(ctx, t, c, o)
			got, err := c.DryRunCreate(ctx, o)
			if err != nil {
				t.Fatalf("server-side dry run of %s %s/%s refused:\n%v\n%s", o.GetKind(), o.GetNamespace(), o.GetName(), err, chartrender.YAML(o))
			}
			if got.GetName() != o.GetName() || got.GetNamespace() != o.GetNamespace() {
				t.Errorf("dry run answered %s/%s, want %s/%s", got.GetNamespace(), got.GetName(), o.GetNamespace(), o.GetName())
			}
			// A dry run stores nothing.
			res, err := c.Resource(ctx, o.GroupVersionKind(), o.GetNamespace())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := res.Get(ctx, o.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get %s %s after the dry run: %v, want NotFound", o.GetKind(), o.GetName(), err)
			}
		})
	}

	// The same server refuses broken variants, so the acceptance above is the
	// CRDs' verdict and not a server that takes anything.
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
			name:     "SchemeOutsideEnum",
			kind:     "ServiceMonitor",
			breaks:   setEndpoint("HTTPS", "scheme"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.endpoints[0].scheme",
		},
		{
			name:     "IntervalNotADuration",
			kind:     "ServiceMonitor",
			breaks:   setEndpoint("30 seconds", "interval"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.endpoints[0].interval",
		},
		{
			name:     "MissingSelector",
			kind:     "ServiceMonitor",
			breaks:   remove("spec", "selector"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.selector",
		},
		{
			name:     "MisspeltEndpointField",
			kind:     "ServiceMonitor",
			breaks:   setEndpoint("/var/run/secrets/kubernetes.io/serviceaccount/token", "bearerTokenFlie"),
			refused:  apierrors.IsBadRequest,
			mentions: "bearerTokenFlie",
		},
		{
			name:     "ForNotADuration",
			kind:     "PrometheusRule",
			breaks:   setFirstRule("ten minutes", "for"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.groups[0].rules[0].for",
		},
		{
			name:     "RuleWithoutExpr",
			kind:     "PrometheusRule",
			breaks:   removeFirstRule("expr"),
			refused:  apierrors.IsInvalid,
			mentions: "spec.groups[0].rules[0].expr",
		},
		{
			name:     "GroupWithoutName",
			kind:     "PrometheusRule",
			breaks:   removeFirstGroupName,
			refused:  apierrors.IsInvalid,
			mentions: "spec.groups[0].name",
		},
	} {
		t.Run("Refuses/"+tc.kind+"/"+tc.name, func(t *testing.T) {
			o := chartrender.Find(t, objs, tc.kind).DeepCopy()
			if err := tc.breaks(o); err != nil {
				t.Fatalf("breaking %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			requireServed(ctx, t, c, o)
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

// monitoringObjects are the objects a render with monitoring on has and
// the default render lacks, all of them in the release namespace or
// cluster-scoped.
func monitoringObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	key := func(o *unstructured.Unstructured) string {
		return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	base := map[string]bool{}
	for _, o := range chartrender.RenderSets(t, releaseNamespace, e2bOn...) {
		base[key(o)] = true
	}
	var out []*unstructured.Unstructured
	for _, o := range chartrender.RenderSets(t, releaseNamespace, monitoringOn...) {
		if base[key(o)] {
			continue
		}
		if ns := o.GetNamespace(); ns != "" && ns != releaseNamespace {
			t.Errorf("%s rendered in namespace %q, want the release namespace %q", key(o), ns, releaseNamespace)
		}
		out = append(out, o)
	}
	return out
}

// requireServed fails the test unless the server serves o's kind, and, for
// a prometheus-operator kind, serves it namespaced: the render puts those
// objects in the release namespace.
func requireServed(ctx context.Context, t *testing.T, c *cluster.Cluster, o *unstructured.Unstructured) {
	t.Helper()
	gvk := o.GroupVersionKind()
	mapping, err := c.ServedRESTMapping(ctx, gvk)
	if err != nil {
		t.Fatalf("the API server serves no %s (is its CRD in tests/testdata/prometheus-operator-crds?): %v", gvk, err)
	}
	if gvk.Group == monitoringGroup && mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("%s is not namespaced on the server", gvk)
	}
}

// setEndpoint returns a change that sets a field of the first endpoint of a
// ServiceMonitor.
func setEndpoint(value any, field string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		return editFirst(o, []string{"spec", "endpoints"}, func(ep map[string]any) error {
			ep[field] = value
			return nil
		})
	}
}

// setFirstRule returns a change that sets a field of the first rule of the
// first group of a PrometheusRule.
func setFirstRule(value any, field string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		return editFirstRule(o, func(rule map[string]any) error {
			rule[field] = value
			return nil
		})
	}
}

// removeFirstRule returns a change that deletes a field, which must exist,
// of the first rule of the first group.
func removeFirstRule(field string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		return editFirstRule(o, func(rule map[string]any) error {
			if _, ok := rule[field]; !ok {
				return fmt.Errorf("the first rule has no %s", field)
			}
			delete(rule, field)
			return nil
		})
	}
}

// removeFirstGroupName deletes the name of the first rule group.
func removeFirstGroupName(o *unstructured.Unstructured) error {
	return editFirst(o, []string{"spec", "groups"}, func(group map[string]any) error {
		if _, ok := group["name"]; !ok {
			return errors.New("the first group has no name")
		}
		delete(group, "name")
		return nil
	})
}

func editFirstRule(o *unstructured.Unstructured, edit func(map[string]any) error) error {
	return editFirst(o, []string{"spec", "groups"}, func(group map[string]any) error {
		u := &unstructured.Unstructured{Object: group}
		return editFirst(u, []string{"rules"}, edit)
	})
}

// editFirst applies edit to the first element, an object, of the list at
// path, and writes the list back.
func editFirst(o *unstructured.Unstructured, path []string, edit func(map[string]any) error) error {
	list, found, err := unstructured.NestedSlice(o.Object, path...)
	if err != nil || !found || len(list) == 0 {
		return errors.Join(err, fmt.Errorf("no list at %s", strings.Join(path, ".")))
	}
	first, ok := list[0].(map[string]any)
	if !ok {
		return fmt.Errorf("%s[0] is %T, not an object", strings.Join(path, "."), list[0])
	}
	if err := edit(first); err != nil {
		return err
	}
	return unstructured.SetNestedSlice(o.Object, list, path...)
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
