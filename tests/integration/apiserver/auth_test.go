package apiserver_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// TestAuthorization checks that sandboxes are guarded by the cluster's
// RBAC: an unprivileged user is refused until a Role grants her reads in
// one namespace, and then may read there and nowhere else, and still may
// not create.
func TestAuthorization(t *testing.T) {
	e := sharedEnv(t)
	ctx := testContext(t)
	const granted, other = "auth-granted", "auth-other"
	admin := e.cluster.Clientset()
	for _, ns := range []string{granted, other} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	e.mustCreate(ctx, t, newSandbox(granted, "shared", withTemplate(templateBase)))

	alice, aliceClientset := e.userClients(t, cluster.UnprivilegedUser)
	if _, err := listNames(ctx, alice, granted, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice lists sandboxes with no grant: %v, want Forbidden", err)
	}
	if _, err := listNames(ctx, alice, "", metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice lists sandboxes in all namespaces with no grant: %v, want Forbidden", err)
	}
	before := e.claimed()
	_, err := alice.Namespace(granted).Create(ctx, toUnstructured(t, newSandbox(granted, "alices", withTemplate(templateBase))), metav1.CreateOptions{})
	if err == nil {
		e.deleteAtCleanup(t, granted, "alices")
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("alice creates a sandbox with no grant: %v, want Forbidden", err)
	}
	if after := e.claimed(); after != before {
		t.Errorf("a forbidden create changed the fleet's claims from %d to %d", before, after)
	}
	if got, err := listNames(ctx, e.sandboxes, granted, metav1.ListOptions{}); err != nil || !slices.Contains(got, granted+"/shared") {
		t.Errorf("admin lists %s: %v (%v), want shared in it", granted, got, err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "sandbox-reader", Namespace: granted},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{group},
			Resources: []string{"sandboxes"},
			Verbs:     []string{"get", "list"},
		}},
	}
	if _, err := admin.RbacV1().Roles(granted).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-reads-sandboxes", Namespace: granted},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: cluster.UnprivilegedUser}},
	}
	if _, err := admin.RbacV1().RoleBindings(granted).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding: %v", err)
	}

	// RBAC reads bindings from an informer: the grant lands shortly.
	var listed []string
	poll.UntilNil(t, "alice's list of "+granted+" to be allowed after the grant", func() error {
		var err error
		listed, err = listNames(ctx, alice, granted, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			return err
		}
		if err != nil {
			t.Fatalf("alice lists %s after the grant: %v", granted, err)
		}
		return nil
	})
	if !slices.Contains(listed, granted+"/shared") {
		t.Errorf("alice's list of %s: %v, want shared in it", granted, listed)
	}
	if _, err := alice.Namespace(granted).Get(ctx, "shared", metav1.GetOptions{}); err != nil {
		t.Errorf("alice gets %s/shared after the grant: %v", granted, err)
	}
	if _, err := listNames(ctx, alice, other, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice lists %s, which the grant does not cover: %v, want Forbidden", other, err)
	}
	if _, err := listNames(ctx, alice, "", metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice lists all namespaces with a namespaced grant: %v, want Forbidden", err)
	}
	_, err = alice.Namespace(granted).Create(ctx, toUnstructured(t, newSandbox(granted, "alices", withTemplate(templateBase))), metav1.CreateOptions{})
	if err == nil {
		e.deleteAtCleanup(t, granted, "alices")
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("alice creates with a read-only grant: %v, want Forbidden", err)
	}
	// A subresource is its own resource to RBAC: reads do not cover it.
	err = aliceClientset.Discovery().RESTClient().Post().AbsPath(subresourcePath(granted, "shared", "pause")).
		SetHeader("Content-Type", "application/json").Body([]byte(`{}`)).Do(ctx).Error()
	if !apierrors.IsForbidden(err) {
		t.Errorf("alice pauses with a read-only grant: %v, want Forbidden", err)
	}
}
