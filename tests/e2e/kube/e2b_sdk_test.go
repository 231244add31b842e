// Package kube_test runs the unmodified e2b JavaScript SDK against the
// Kubernetes deployment of sandbox-operator: sandbox-apiserver serving its
// e2b surface (behind a real kube-apiserver, reading NodeInventory published
// by a simulated sandboxd fleet) and sandbox-envd-proxy carrying the SDK's
// data plane to the fleet's envd-compatible guests. The suite itself is
// tests/e2e/js/kube.test.mjs; this harness starts the servers, runs it with
// node, and then checks through the Kubernetes API what it created.
package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	// The e2b keys' namespaces: the suite's key claims in teamA; the other
	// key sees teamB only.
	teamA = "team-a"
	teamB = "team-b"

	// The SDK's default alias and the pool image behind it; the suite
	// also names imageDirect without an alias.
	aliasBase   = "base"
	imageBase   = "registry.example/agents/base:1"
	imageDirect = "python-3.12"

	// @e2b/code-interpreter's default template and the image behind it.
	aliasCodeInterpreter = "code-interpreter-v1"
	imageCodeInterpreter = "e2b-ci:latest"

	domain = "sandbox.e2e.test"

	setupTimeout = 4 * time.Minute
	suiteTimeout = 8 * time.Minute
)

var sandboxGVR = schema.GroupVersionResource{Group: harness.KubeAPIGroup, Version: harness.KubeAPIVersion, Resource: "sandboxes"}

func TestE2BSDKAgainstKubernetes(t *testing.T) {
	project := nodejs.Setup(t, "tests/e2e/js")
	project.Copy(t, "lib.mjs", "kube.test.mjs", "codeinterp.test.mjs")

	apiserverBin := testbin.Path(t, "SANDBOX_APISERVER", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver")
	proxyBin := testbin.Path(t, "SANDBOX_ENVD_PROXY", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-envd-proxy")

	harness.LocateKubeAPIServer(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c := harness.StartCluster(t, ctx, dir)

	token := harness.RandomHex(t)
	envdSecret := harness.RandomHex(t)
	keyA, keyB := "e2b_"+harness.RandomHex(t), "e2b_"+harness.RandomHex(t)
	tokenFile := harness.WriteFile(t, dir, "sandboxd-token", token+"\n")
	secretFile := harness.WriteFile(t, dir, "envd-secret", envdSecret+"\n")
	keyFile := harness.WriteFile(t, dir, "e2b-keys", fmt.Sprintf("# key namespace\n%s %s\n%s %s\n", keyA, teamA, keyB, teamB))
	aliasFile := harness.WriteFile(t, dir, "e2b-aliases", fmt.Sprintf("%s %s\n%s %s\n", aliasBase, imageBase, aliasCodeInterpreter, imageCodeInterpreter))

	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes:     3,
		RootToken: token,
		// The SDK asks for internet access unless told otherwise, which
		// the surface maps to the egress lane.
		EgressAttachment: true,
		EchoPorts:        []int{},
		Envd:             &simfleet.EnvdConfig{Secret: []byte(envdSecret)},
		ScratchRoot:      filepath.Join(dir, "scratch"),
		Publish:          &simfleet.PublishConfig{Client: c.Dynamic(), Interval: time.Second},
		Customize: func(i int, cfg *node.Config) {
			cfg.Pools = []sandboxd.PoolSpec{
				{Template: imageBase, Net: "egress", Warm: 3},
				{Template: imageBase, Net: "none", Warm: 2},
				{Template: imageDirect, Net: "egress", Warm: 2},
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fleet: %v", err)
		}
	})

	// One more node, of isolated machines, keeps the code interpreter's
	// pool (its IPython kernels need a machine and the e2b-ci layer); it
	// publishes into the same cluster as the others.
	ci := startCodeInterpreterNode(t, c, token, envdSecret, filepath.Join(dir, "ci-scratch"))

	front := harness.StartKubeE2B(t, ctx, c, harness.KubeE2BConfig{
		APIServer: apiserverBin, EnvdProxy: proxyBin, Dir: dir,
		Namespace: teamA, Domain: domain,
		TokenFile: tokenFile, EnvdSecretFile: secretFile, APIKeyFile: keyFile, AliasFile: aliasFile,
	})
	e2bAddr, proxyAddr := front.APIAddr, front.ProxyAddr
	var nodes []string
	for _, n := range f.Nodes() {
		nodes = append(nodes, n.Name())
	}
	harness.WaitInventory(t, ctx, c, nodes, 3)
	harness.WaitInventory(t, ctx, c, []string{ci.Node(0).Name()}, 2)

	report := filepath.Join(dir, "report.json")
	suiteCtx, suiteCancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer suiteCancel()
	project.Run(t, suiteCtx, []string{
		"E2B_API_URL=http://" + e2bAddr,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + domain,
		"E2B_API_KEY=" + keyA,
		"E2E_OTHER_KEY=" + keyB,
		"E2E_TEMPLATE=" + imageDirect,
		"E2E_REPORT=" + report,
	}, "--test", "--test-reporter=spec", "--test-concurrency=1", "kube.test.mjs")

	// The npm @e2b/code-interpreter through sandbox-apiserver's surface
	// and sandbox-envd-proxy.
	project.Run(t, suiteCtx, []string{
		"E2B_API_URL=http://" + e2bAddr,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + domain,
		"E2B_API_KEY=" + keyA,
	}, "--test", "--test-reporter=spec", "--test-concurrency=1", "codeinterp.test.mjs")

	// The sandbox the suite kept is a Sandbox in the key's namespace, seen
	// through the kube-apiserver like any other.
	var facts struct {
		KeptID string `json:"keptId"`
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the suite wrote no report: %v", err)
	}
	if err := json.Unmarshal(b, &facts); err != nil || facts.KeptID == "" {
		t.Fatalf("report %s: %v", b, err)
	}
	sandboxes := c.Dynamic().Resource(sandboxGVR)
	list, err := sandboxes.Namespace(teamA).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, item := range list.Items {
		if id := item.GetAnnotations()["sandbox.cocoonstack.io/id"]; sandbox.SameID(id, facts.KeptID) {
			name = item.GetName()
		}
	}
	if name == "" {
		t.Fatalf("sandbox %s created through e2b is not among %d Sandboxes in %s", facts.KeptID, len(list.Items), teamA)
	}
	other, err := sandboxes.Namespace(teamB).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range other.Items {
		if sandbox.SameID(item.GetAnnotations()["sandbox.cocoonstack.io/id"], facts.KeptID) {
			t.Fatalf("sandbox %s also appears in %s", facts.KeptID, teamB)
		}
	}

	// Deleting it through Kubernetes ends it for e2b too.
	if err := sandboxes.Namespace(teamA).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	getCtx, cancel := context.WithTimeout(ctx, poll.Timeout)
	defer cancel()
	poll.UntilNil(t, "the e2b surface to stop serving sandbox "+facts.KeptID+", deleted through Kubernetes", func() error {
		req, _ := http.NewRequestWithContext(getCtx, http.MethodGet, "http://"+e2bAddr+"/sandboxes/"+facts.KeptID, nil)
		req.Header.Set("X-API-KEY", keyA)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			return fmt.Errorf("GET answered %s", resp.Status)
		}
		return nil
	})
}
