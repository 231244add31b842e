package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// testContext bounds one test's requests and waits.
func testContext(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	tb.Cleanup(cancel)
	return ctx
}

// sandboxOption adjusts a Sandbox before it is created.
type sandboxOption func(*agentsv1beta1.Sandbox)

// withTemplate names the pool template by annotation.
func withTemplate(template string) sandboxOption {
	return withAnnotation(sandbox.AnnotationTemplate, template)
}

// withImage names the pool template by the pod template's image.
func withImage(image string) sandboxOption {
	return func(sb *agentsv1beta1.Sandbox) {
		sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: image}}
	}
}

func withAnnotation(key, value string) sandboxOption {
	return func(sb *agentsv1beta1.Sandbox) {
		if sb.Annotations == nil {
			sb.Annotations = map[string]string{}
		}
		sb.Annotations[key] = value
	}
}

func withLabel(key, value string) sandboxOption {
	return func(sb *agentsv1beta1.Sandbox) {
		if sb.Labels == nil {
			sb.Labels = map[string]string{}
		}
		sb.Labels[key] = value
	}
}

func withShutdownTime(t time.Time) sandboxOption {
	return func(sb *agentsv1beta1.Sandbox) {
		mt := metav1.NewTime(t)
		sb.Spec.ShutdownTime = &mt
	}
}

// newSandbox is an upstream Sandbox as a client would write it.
func newSandbox(namespace, name string, opts ...sandboxOption) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{
		TypeMeta:   metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}
	for _, o := range opts {
		o(sb)
	}
	return sb
}

func toUnstructured(tb testing.TB, obj runtime.Object) *unstructured.Unstructured {
	tb.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		tb.Fatalf("convert %T: %v", obj, err)
	}
	unstructured.RemoveNestedField(content, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: content}
}

func fromUnstructured(tb testing.TB, u *unstructured.Unstructured) *agentsv1beta1.Sandbox {
	tb.Helper()
	var sb agentsv1beta1.Sandbox
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sb); err != nil {
		tb.Fatalf("decode sandbox %s: %v", u.GetName(), err)
	}
	return &sb
}

// createSandbox creates sb as the admin and returns the server's answer,
// or the error.
func (e *testEnv) createSandbox(ctx context.Context, tb testing.TB, sb *agentsv1beta1.Sandbox) (*agentsv1beta1.Sandbox, error) {
	tb.Helper()
	u, err := e.sandboxes.Namespace(sb.Namespace).Create(ctx, toUnstructured(tb, sb), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(tb, u), nil
}

// mustCreate creates sb and registers its deletion at the end of the test.
func (e *testEnv) mustCreate(ctx context.Context, tb testing.TB, sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	tb.Helper()
	got, err := e.createSandbox(ctx, tb, sb)
	if err != nil {
		tb.Fatalf("create %s/%s: %v", sb.Namespace, sb.Name, err)
	}
	e.deleteAtCleanup(tb, sb.Namespace, sb.Name)
	return got
}

// deleteAtCleanup deletes the sandbox when the test ends, tolerating one
// that is already gone, so a failed test leaves no claim for the next.
func (e *testEnv) deleteAtCleanup(tb testing.TB, namespace, name string) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		err := e.sandboxes.Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("cleanup: delete %s/%s: %v", namespace, name, err)
		}
	})
}

func (e *testEnv) getSandbox(ctx context.Context, tb testing.TB, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	tb.Helper()
	u, err := e.sandboxes.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(tb, u), nil
}

// listNames lists sandboxes through client (all namespaces when namespace
// is empty) and returns "<namespace>/<name>" of each, sorted.
func listNames(ctx context.Context, client dynamic.NamespaceableResourceInterface, namespace string, opts metav1.ListOptions) ([]string, error) {
	var (
		list *unstructured.UnstructuredList
		err  error
	)
	if namespace == "" {
		list, err = client.List(ctx, opts)
	} else {
		list, err = client.Namespace(namespace).List(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, it.GetNamespace()+"/"+it.GetName())
	}
	slices.Sort(out)
	return out, nil
}

// inNamespaces keeps the refs in the given namespaces: other tests' and
// benchmarks' sandboxes do not concern the caller.
func inNamespaces(refs []string, namespaces ...string) []string {
	var out []string
	for _, r := range refs {
		for _, ns := range namespaces {
			if len(r) > len(ns) && r[:len(ns)+1] == ns+"/" {
				out = append(out, r)
			}
		}
	}
	return out
}

// deadlineOf parses the deadline annotation the server writes.
func deadlineOf(tb testing.TB, sb *agentsv1beta1.Sandbox) time.Time {
	tb.Helper()
	raw, ok := sb.Annotations[sandbox.AnnotationDeadline]
	if !ok {
		tb.Fatalf("sandbox %s has no %s annotation: %v", sb.Name, sandbox.AnnotationDeadline, sb.Annotations)
	}
	d, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		tb.Fatalf("sandbox %s: %s = %q: %v", sb.Name, sandbox.AnnotationDeadline, raw, err)
	}
	return d
}

// condition returns the sandbox's condition of type typ, if any.
func condition(sb *agentsv1beta1.Sandbox, typ string) (metav1.Condition, bool) {
	for _, c := range sb.Status.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return metav1.Condition{}, false
}

// statusCode is the HTTP status an API error carries, 0 for another error.
func statusCode(err error) int32 {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Code
	}
	return 0
}

// subresourcePath is the path of a sandbox's subresource.
func subresourcePath(namespace, name, sub string) string {
	return fmt.Sprintf("/apis/%s/%s/namespaces/%s/sandboxes/%s/%s", group, version, namespace, name, sub)
}

// postSubresource POSTs body to a sandbox's subresource as the admin and
// decodes a 201 answer into out.
func (e *testEnv) postSubresource(ctx context.Context, namespace, name, sub string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var code int
	raw, err := e.raw.Post().AbsPath(subresourcePath(namespace, name, sub)).
		SetHeader("Content-Type", "application/json").
		Body(data).Do(ctx).StatusCode(&code).Raw()
	if err != nil {
		return err
	}
	if code != http.StatusCreated {
		return fmt.Errorf("POST %s answered %d, want 201: %s", sub, code, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode %s answer %s: %w", sub, raw, err)
	}
	return nil
}

// ensureNamespace creates the namespace as the admin unless it exists: the
// shared cluster outlives each test, and no controller would finish
// deleting one.
func (e *testEnv) ensureNamespace(ctx context.Context, tb testing.TB, name string) {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.cluster.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create namespace %s: %v", name, err)
	}
}
