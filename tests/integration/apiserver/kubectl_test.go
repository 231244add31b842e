package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kversion "k8s.io/apimachinery/pkg/version"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api/subresources"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// TestKubectl runs kubectl against the cluster: its version against the
// server's, the table columns of kubectl get, kubectl explain from the
// published OpenAPI, and a subresource through kubectl create --raw.
//
// kubectl comes from the build, never from PATH: under Bazel the test's
// data holds //tools/kube/kubectl and $KUBECTL its runfiles location;
// under plain go test it is built from k8s.io/kubernetes at the version
// go.mod pins, version-stamped (cluster.KubectlBinary).
func TestKubectl(t *testing.T) {
	kubectl, err := cluster.KubectlBinary()
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	e := sharedEnv(t)
	ctx := testContext(t)
	const ns, name = "kubectl", "shown"
	sb := e.mustCreate(ctx, t, newSandbox(ns, name, withTemplate(templateBase)))
	cacheDir := t.TempDir()
	run := func(stdin string, args ...string) string {
		t.Helper()
		args = append([]string{"--kubeconfig=" + e.cluster.Kubeconfig(), "--cache-dir=" + cacheDir}, args...)
		cmd := exec.CommandContext(ctx, kubectl, args...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args[2:], " "), err, out)
		}
		return string(out)
	}

	t.Run("Version", func(t *testing.T) {
		// Both binaries are built from the same k8s.io/kubernetes and
		// stamped with its version, so kubectl sees no skew.
		var v struct {
			Client *kversion.Info `json:"clientVersion"`
			Server *kversion.Info `json:"serverVersion"`
		}
		out := run("", "version", "-o", "json")
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Client == nil || v.Server == nil {
			t.Fatalf("kubectl version -o json answered %s (%v)", out, err)
		}
		if !strings.HasPrefix(v.Client.GitVersion, "v1.") || v.Client.GitVersion != v.Server.GitVersion {
			t.Errorf("kubectl reports client %q and server %q, want the same stamped v1.x release",
				v.Client.GitVersion, v.Server.GitVersion)
		}
	})

	t.Run("GetTable", func(t *testing.T) {
		out := run("", "get", "sandboxes", "-A")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		header := strings.Fields(lines[0])
		if want := []string{"NAMESPACE", "NAME", "NODE", "PHASE", "TEMPLATE", "AGE", "DEADLINE"}; !slices.Equal(header, want) {
			t.Errorf("kubectl get sandboxes -A header %q, want %q", header, want)
		}
		var row []string
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) > 1 && f[0] == ns && f[1] == name {
				row = f
			}
		}
		if row == nil {
			t.Fatalf("kubectl get sandboxes -A shows no row for %s/%s:\n%s", ns, name, out)
		}
		if len(row) != 7 || row[2] != sb.Status.NodeName || row[3] != "Running" || row[4] != templateBase ||
			row[6] != sb.Annotations[sandbox.AnnotationDeadline] {
			t.Errorf("row %q, want node %s, Running, template %s, deadline %s", row, sb.Status.NodeName, templateBase, sb.Annotations[sandbox.AnnotationDeadline])
		}
	})

	t.Run("Explain", func(t *testing.T) {
		waitOpenAPIV3(ctx, t, e, "apis/"+group+"/"+version)
		out := run("", "explain", "sandboxes")
		for _, want := range []string{"KIND:", "Sandbox", "VERSION:", version, "spec"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl explain sandboxes lacks %q:\n%s", want, out)
			}
		}
		out = run("", "explain", "sandboxes.spec.shutdownTime")
		if !strings.Contains(out, "shutdownTime") {
			t.Errorf("kubectl explain sandboxes.spec.shutdownTime:\n%s", out)
		}
	})

	t.Run("CreateRawSnapshot", func(t *testing.T) {
		out := run(`{"name":"from-kubectl"}`, "create", "--raw", subresourcePath(ns, name, "snapshot"), "-f", "-")
		var snap subresources.SandboxSnapshot
		if err := json.Unmarshal([]byte(out), &snap); err != nil || snap.Name != "from-kubectl" || snap.ID == "" {
			t.Errorf("kubectl create --raw .../snapshot answered %s (%v)", out, err)
		}
	})

	t.Run("GetAndDelete", func(t *testing.T) {
		if out := run("", "get", "sandbox", name, "-n", ns, "-o", "jsonpath={.status.nodeName}"); out != sb.Status.NodeName {
			t.Errorf("kubectl get -o jsonpath={.status.nodeName}: %q, want %q", out, sb.Status.NodeName)
		}
		// kubectl sends DeleteOptions with a propagation policy.
		run("", "delete", "sandbox", name, "-n", ns, "--wait=false")
		if _, err := e.getSandbox(ctx, t, ns, name); !apierrors.IsNotFound(err) {
			t.Errorf("get after kubectl delete: %v, want NotFound", err)
		}
	})
}

// waitOpenAPIV3 waits until the kube-apiserver's OpenAPI v3 index lists
// path, which kubectl explain looks the resource up in. The aggregator
// fetches an aggregated server's OpenAPI on its own schedule: a fetch that
// fails because the server was not listening yet is retried only a minute
// later, well after the APIService reports Available.
func waitOpenAPIV3(ctx context.Context, t *testing.T, e *testEnv, path string) {
	t.Helper()
	last, held := "no answer yet", false
	defer func() {
		if !held {
			t.Logf("the OpenAPI v3 index at the end of the wait: %s", last)
		}
	}()
	poll.UntilWithin(t, waitTimeout, "OpenAPI v3 of the kube-apiserver to list "+path, func() bool {
		paths, err := e.cluster.Clientset().Discovery().OpenAPIV3().Paths()
		if err != nil {
			last = err.Error()
			return false
		}
		_, held = paths[path]
		last = fmt.Sprintf("%d paths, %s not among them", len(paths), path)
		return held
	})
}
