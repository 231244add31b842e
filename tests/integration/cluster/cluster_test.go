// Package cluster_test starts the real test cluster (embedded etcd and a
// kube-apiserver process) and checks what later integration tests rely on:
// authentication and RBAC, the NodeInventory CRD with the simulator's
// publisher, and routing an aggregated API to a server on loopback.
package cluster_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// testTimeout bounds each phase that waits on the cluster; generous for a
// loaded two-core machine.
const testTimeout = 90 * time.Second

// TestCluster starts one cluster and runs every check against it: a
// cluster costs most of this test's time, and the checks use disjoint
// namespaces and API groups.
func TestCluster(t *testing.T) {
	c := cluster.Start(t)
	t.Logf("cluster up in %v at %s", c.StartupDuration().Round(time.Millisecond), c.Host())

	t.Run("Version", func(t *testing.T) { testVersion(t, c) })
	t.Run("AdminAndUnprivilegedUser", func(t *testing.T) { testAdminAndUnprivilegedUser(t, c) })
	t.Run("Kubeconfig", func(t *testing.T) { testKubeconfig(t, c) })
	t.Run("NodeInventoryPublisher", func(t *testing.T) { testNodeInventoryPublisher(t, c) })
	t.Run("AggregatedAPI", func(t *testing.T) { testAggregatedAPI(t, c) })
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// testVersion checks that the binary carries a release version, not the
// unstamped v0.0.0-master a plain go build reports.
func testVersion(t *testing.T, c *cluster.Cluster) {
	v, err := c.Clientset().Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || v.Minor == "" || !strings.HasPrefix(v.GitVersion, "v1."+v.Minor+".") {
		t.Fatalf("server version %+v is not a stamped v1.x release", v)
	}
}

func testAdminAndUnprivilegedUser(t *testing.T, c *cluster.Cluster) {
	ctx := testContext(t)
	admin := c.Clientset()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rbac-check"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creates a namespace: %v", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns.Name},
		Data:       map[string]string{"k": "v"},
	}
	if _, err := admin.CoreV1().ConfigMaps(ns.Name).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creates a ConfigMap: %v", err)
	}
	got, err := admin.CoreV1().ConfigMaps(ns.Name).Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("admin reads the ConfigMap back: %v, %v", got.Data, err)
	}

	alice, err := kubernetes.NewForConfig(c.UserConfig(cluster.UnprivilegedUser))
	if err != nil {
		t.Fatal(err)
	}
	// Who the server thinks alice is: authenticated, in her group.
	review, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("alice's self-subject review: %v", err)
	}
	if u := review.Status.UserInfo; u.Username != cluster.UnprivilegedUser || !slices.Contains(u.Groups, cluster.UnprivilegedGroup) {
		t.Fatalf("alice authenticates as %q in %v", u.Username, u.Groups)
	}
	if _, err := alice.CoreV1().ConfigMaps(ns.Name).Get(ctx, cm.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice reads the ConfigMap: err = %v, want Forbidden", err)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns.Name}}
	if _, err := alice.CoreV1().ConfigMaps(ns.Name).Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice creates a ConfigMap: err = %v, want Forbidden", err)
	}

	// A wrong token is not a user at all.
	bad := c.UserConfig(cluster.UnprivilegedUser)
	bad.BearerToken += "x"
	badClient, err := kubernetes.NewForConfig(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := badClient.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("a wrong token lists namespaces: err = %v, want Unauthorized", err)
	}
}

// testKubeconfig checks that the kubeconfig file works as a client would
// load it.
func testKubeconfig(t *testing.T, c *cluster.Cluster) {
	ctx := testContext(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatalf("load %s: %v", c.Kubeconfig(), err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self-subject review through the kubeconfig: %v", err)
	}
	if u := review.Status.UserInfo; u.Username != cluster.AdminUser || !slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("kubeconfig authenticates as %q in %v, want the admin", u.Username, u.Groups)
	}
}
