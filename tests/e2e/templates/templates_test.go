// Package templates_test runs the template build and snapshot suite
// (tests/e2e/js/templates.test.mjs) with the unmodified e2b SDK against
// both e2b fronts, each with both build stores:
//
//   - mesh+dir: sandbox-e2b-local, the README's one-command system, with
//     its directory store;
//   - mesh+s3: sandbox-e2b over sandboxd-sim nodes, keeping uploads in an
//     S3 store (gofakes3, served by this test on loopback);
//   - kube+dir and kube+s3: sandbox-apiserver behind a real
//     kube-apiserver, reading the NodeInventory sandboxd-sim publishes,
//     with sandbox-envd-proxy as the data plane.
//
// Builds need isolated sandboxes (each its own namespaces over the base
// root filesystem), so the nodes run as the sandboxd-sim binary or inside
// sandbox-e2b-local, never as the in-process fleet. After each run the
// harness checks that nothing is left claimed on the nodes.
package templates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	// imageBase is the pool image behind the alias "base" the suite
	// builds from; sandbox-e2b-local serves it by default.
	imageBase = "e2b-base:latest"
	domain    = "sandbox.templates.test"
	// namespace is the Kubernetes front's e2b namespace.
	namespace = "team-templates"

	// uploadMax is the directory stores' upload limit: small, so the
	// suite's over-the-limit upload is quick to make.
	uploadMax     = 256 << 10
	buildParallel = 2

	simNodes = 2
	// simPools is both lanes of imageBase on every node: the SDK's
	// default create takes the egress lane, builds and snapshots the
	// isolated one.
	simPools = imageBase + ":egress:=2," + imageBase + ":none:=2"

	setupTimeout = 3 * time.Minute
	suiteTimeout = 5 * time.Minute
)

// binaries are the servers the stacks run.
type binaries struct{ sim, e2b, local, apiserver, proxy string }

// run is one started stack: the suite's environment, and what to check
// once the suite ran (with t.Errorf: it runs as a cleanup).
type run struct {
	env   []string
	after func(t *testing.T)
}

func TestTemplateBuildsThroughTheSDK(t *testing.T) {
	project := nodejs.Setup(t, "tests/e2e/js")
	project.Copy(t, "lib.mjs", "templates.test.mjs")
	bins := binaries{
		sim:       testbin.Path(t, "SANDBOXD_SIM", "github.com/cocoonstack/sandbox-operator/src/cmd/sandboxd-sim"),
		e2b:       testbin.Path(t, "SANDBOX_E2B", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b"),
		local:     testbin.Path(t, "SANDBOX_E2B_LOCAL", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b-local"),
		apiserver: testbin.Path(t, "SANDBOX_APISERVER", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver"),
		proxy:     testbin.Path(t, "SANDBOX_ENVD_PROXY", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-envd-proxy"),
	}
	stacks := []struct {
		name  string
		start func(t *testing.T, bins binaries) run
	}{
		{"mesh+dir", startLocalDir},
		{"mesh+s3", startMeshS3},
		{"kube+dir", func(t *testing.T, bins binaries) run { return startKube(t, bins, false) }},
		{"kube+s3", func(t *testing.T, bins binaries) run { return startKube(t, bins, true) }},
	}
	for i, s := range stacks {
		t.Run(s.name, func(t *testing.T) {
			r := s.start(t, bins)
			// The checks run whether the suite passed or not, while the
			// stack still runs (cleanups run last-registered first).
			t.Cleanup(func() { r.after(t) })
			ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
			defer cancel()
			prefix := fmt.Sprintf("e2e-%d-%s", i, harness.RandomHex(t)[:8])
			project.Run(t, ctx, append(r.env,
				"E2E_TEMPLATE_PREFIX="+prefix,
				"E2E_BUILD_PARALLEL="+strconv.Itoa(buildParallel),
			), "--test", "--test-reporter=spec", "--test-concurrency=1", "templates.test.mjs")
		})
	}
}

// startLocalDir is sandbox-e2b-local with its directory store. Its nodes'
// root token is its own, so what is left is asked of the e2b API instead.
func startLocalDir(t *testing.T, bins binaries) run {
	buildDir := t.TempDir()
	env := harness.StartLocal(t, bins.local,
		"--nodes=2", "--cold-nodes=0", "--warm=2",
		"--build-dir="+buildDir,
		"--build-upload-max="+strconv.Itoa(uploadMax),
		"--build-parallel="+strconv.Itoa(buildParallel),
	)
	return run{
		env: append(env, "E2E_UPLOAD_LIMIT="+strconv.Itoa(uploadMax)),
		after: func(t *testing.T) {
			checkNoE2BSandboxes(t, env)
			checkDirEmpty(t, buildDir)
		},
	}
}

// secrets are the files every stack's servers read.
type secrets struct {
	token, key                                     string
	tokenFile, secretFile, keyFile, aliasFile, dir string
}

// writeSecrets writes them to dir; the API key belongs to keyNamespace, or
// to the front's default namespace when that is empty.
func writeSecrets(t *testing.T, dir, keyNamespace string) secrets {
	s := secrets{dir: dir, token: harness.RandomHex(t), key: "e2b_" + harness.RandomHex(t)}
	s.tokenFile = harness.WriteFile(t, dir, "sandboxd-token", s.token+"\n")
	s.secretFile = harness.WriteFile(t, dir, "envd-secret", harness.RandomHex(t)+"\n")
	s.keyFile = harness.WriteFile(t, dir, "e2b-keys", strings.TrimSpace(s.key+" "+keyNamespace)+"\n")
	s.aliasFile = harness.WriteFile(t, dir, "e2b-aliases", "base "+imageBase+"\n")
	return s
}

// startSim runs the isolated sandboxd-sim nodes; extra are more flags.
func startSim(t *testing.T, bins binaries, s secrets, extra ...string) *harness.Sim {
	return harness.StartSim(t, bins.sim, s.dir, simNodes, append([]string{
		"--nodes=" + strconv.Itoa(simNodes),
		"--api-token-file=" + s.tokenFile,
		"--envd-secret-file=" + s.secretFile,
		"--egress-attachment",
		"--echo-ports=",
		"--pools=" + simPools,
		"--scratch-dir=" + filepath.Join(s.dir, "scratch"),
	}, extra...)...)
}

// buildFlags are the --e2b-build* flags of a front: the directory store
// under dir with uploadMax, or the S3 store.
func buildFlags(t *testing.T, dir string, store *fakeS3) (args, env []string) {
	args = []string{"--e2b-builds", "--e2b-build-parallel=" + strconv.Itoa(buildParallel)}
	if store == nil {
		return append(args, "--e2b-build-dir="+filepath.Join(dir, "builds"), "--e2b-build-upload-max="+strconv.Itoa(uploadMax)), nil
	}
	return append(args, store.storeFlags()...), store.env(dir)
}

// startMeshS3 is sandbox-e2b over sandboxd-sim with the S3 store.
func startMeshS3(t *testing.T, bins binaries) run {
	dir := t.TempDir()
	s := writeSecrets(t, dir, "")
	store := startS3(t)
	sim := startSim(t, bins, s)
	args, env := buildFlags(t, dir, store)
	apiListener, apiAddr := harness.Listen(t)
	proxyListener, proxyAddr := harness.Listen(t)
	p := harness.StartProcess(t, "sandbox-e2b", bins.e2b, dir, append([]string{
		"--sandboxd=" + sim.Addrs()[0],
		"--sandboxd-token-file=" + s.tokenFile,
		"--mesh-refresh-interval=500ms",
		"--e2b-bind-address=" + apiAddr,
		"--envd-proxy-bind-address=" + proxyAddr,
		"--e2b-domain=" + domain,
		"--e2b-envd-secret-file=" + s.secretFile,
		"--e2b-api-key-file=" + s.keyFile,
		"--e2b-template-alias-file=" + s.aliasFile,
	}, args...), env, apiListener, proxyListener)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	harness.WaitHealthy(t, ctx, p, "http://"+apiAddr+"/health")
	harness.WaitHealthy(t, ctx, p, "http://"+proxyAddr+"/healthz")
	return run{
		env: suiteEnv(apiAddr, proxyAddr, s.key),
		after: func(t *testing.T) {
			harness.CheckNoClaims(t, s.token, sim.Addrs())
			store.check(t)
		},
	}
}

// startKube is the Kubernetes front over sandboxd-sim publishing its
// NodeInventory, with the directory store or (s3) the S3 store.
func startKube(t *testing.T, bins binaries, s3 bool) run {
	harness.LocateKubeAPIServer(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c := harness.StartCluster(t, ctx, dir)
	s := writeSecrets(t, dir, namespace)
	var store *fakeS3
	if s3 {
		store = startS3(t)
	}
	sim := startSim(t, bins, s, "--kubeconfig="+c.Kubeconfig(), "--publish-interval=1s")
	args, env := buildFlags(t, dir, store)
	front := harness.StartKubeE2B(t, ctx, c, harness.KubeE2BConfig{
		APIServer: bins.apiserver, EnvdProxy: bins.proxy, Dir: dir,
		Namespace: namespace, Domain: domain,
		TokenFile: s.tokenFile, EnvdSecretFile: s.secretFile, APIKeyFile: s.keyFile, AliasFile: s.aliasFile,
		Args: args, Env: env,
	})
	harness.WaitInventory(t, ctx, c, sim.Names(), 2)
	r := run{env: suiteEnv(front.APIAddr, front.ProxyAddr, s.key)}
	if s3 {
		r.after = func(t *testing.T) {
			harness.CheckNoClaims(t, s.token, sim.Addrs())
			store.check(t)
		}
	} else {
		r.env = append(r.env, "E2E_UPLOAD_LIMIT="+strconv.Itoa(uploadMax))
		r.after = func(t *testing.T) {
			harness.CheckNoClaims(t, s.token, sim.Addrs())
			checkDirEmpty(t, filepath.Join(dir, "builds"))
		}
	}
	return r
}

func suiteEnv(apiAddr, proxyAddr, key string) []string {
	return []string{
		"E2B_API_URL=http://" + apiAddr,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + domain,
		"E2B_API_KEY=" + key,
	}
}

// checkNoE2BSandboxes fails the test when the e2b API (of the environment
// env exports) still lists a running or paused sandbox.
func checkNoE2BSandboxes(t *testing.T, env []string) {
	t.Helper()
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	req, err := http.NewRequest(http.MethodGet, vars["E2B_API_URL"]+"/v2/sandboxes?state=running,paused", nil)
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("X-API-KEY", vars["E2B_API_KEY"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET /v2/sandboxes: %v", err)
		return
	}
	defer resp.Body.Close()
	var list []struct {
		SandboxID  string `json:"sandboxID"`
		TemplateID string `json:"templateID"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/sandboxes: %s: %v", resp.Status, err)
		return
	}
	if len(list) > 0 {
		t.Errorf("sandboxes left after the suite: %+v", list)
	}
}

// checkDirEmpty fails the test when a directory store still holds a file:
// the suite deleted every template whose build uploaded one, and an upload
// over the limit must leave nothing behind.
func checkDirEmpty(t *testing.T, dir string) {
	t.Helper()
	var left []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if err != nil {
		t.Errorf("build dir: %v", err)
	}
	if len(left) > 0 {
		t.Errorf("the build dir still holds files after the suite deleted its templates: %v", left)
	}
}
