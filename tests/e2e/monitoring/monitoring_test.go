// Package monitoring_test runs the chart's monitoring against a real
// Prometheus (Debian's package, installed in the build's root): it scrapes
// sandbox-e2b on a mesh of two sandboxd-sim nodes, and their own
// /metrics, while a workload goes through the e2b API and the data plane;
// every panel of the chart's dashboard must then return data, and the
// chart's alert rules, loaded into that Prometheus, must fire when a node
// is killed and resolve once it is back and its pool has refilled. The
// same dashboard is then filled from the Kubernetes front behind a real
// kube-apiserver (kube_test.go), where every panel must have data.
package monitoring_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/prometheus"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// maxClaims is each node's cap of live claims: TestSeriesStayFlat reaches
// it on purpose.
const maxClaims = 6

// system is the system under watch: two nodes, sandbox-e2b over them and
// the Prometheus scraping all three.
type system struct {
	nodes  []*simNode
	e2b    *e2bClient
	metric string // sandbox-e2b's metrics URL
	token  string // the nodes' root token
	prom   *prometheus.Server
}

// startSystem starts the nodes and sandbox-e2b (with the template build
// API on), and a Prometheus over them loaded with the chart's alert rules.
func startSystem(t *testing.T) *system {
	t.Helper()
	simBinary := testbin.Path(t, "SANDBOXD_SIM", "github.com/cocoonstack/sandbox-operator/src/cmd/sandboxd-sim")
	e2bBinary := testbin.Path(t, "SANDBOX_E2B", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b")
	dir := t.TempDir()
	token, secret, key := harness.RandomHex(t), harness.RandomHex(t), "e2b_"+harness.RandomHex(t)
	tokenFile := harness.WriteFile(t, dir, "sandboxd-token", token+"\n")
	secretFile := harness.WriteFile(t, dir, "envd-secret", secret+"\n")
	keyFile := harness.WriteFile(t, dir, "e2b-keys", key+"\n")
	aliasFile := harness.WriteFile(t, dir, "e2b-aliases", "base "+imageBase+"\n")

	common := []string{
		"--unisolated", "--api-token-file=" + tokenFile, "--envd-secret-file=" + secretFile,
		"--egress-attachment", "--echo-ports=", "--refill-delay=20ms", fmt.Sprintf("--max-claims=%d", maxClaims),
		"--pools=" + imageBase + ":none:small=2," + imageBase + ":egress:small=2",
	}
	a := startSimNode(t, simBinary, dir, "node-a", common...)
	b := startSimNode(t, simBinary, dir, "node-b", append(common, "--join="+a.addr)...)

	apiListener, apiAddr := harness.Listen(t)
	proxyListener, proxyAddr := harness.Listen(t)
	metricsListener, metricsAddr := harness.Listen(t)
	p := harness.StartProcess(t, "sandbox-e2b", e2bBinary, dir, []string{
		// Both nodes are seeds, so the mesh keeps a silent one listed
		// (and its pool's target counted) until it is back.
		"--sandboxd=" + a.addr + "," + b.addr,
		"--sandboxd-token-file=" + tokenFile,
		"--mesh-refresh-interval=" + meshRefresh.String(),
		"--mesh-node-timeout=1s",
		"--e2b-bind-address=" + apiAddr,
		"--envd-proxy-bind-address=" + proxyAddr,
		"--metrics-bind-address=" + metricsAddr,
		"--e2b-domain=" + domain,
		"--e2b-envd-secret-file=" + secretFile,
		"--e2b-api-key-file=" + keyFile,
		"--e2b-template-alias-file=" + aliasFile,
		"--e2b-builds", "--e2b-build-dir=" + filepath.Join(dir, "builds"),
		// The traffic is one key's, faster than a tenant's default rate.
		"--e2b-create-rate=0", "--e2b-max-sandboxes=0",
	}, nil, apiListener, proxyListener, metricsListener)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	harness.WaitHealthy(t, ctx, p, "http://"+apiAddr+"/health")
	harness.WaitHealthy(t, ctx, p, "http://"+proxyAddr+"/healthz")

	s := &system{
		nodes:  []*simNode{a, b},
		e2b:    &e2bClient{api: "http://" + apiAddr, dataPlane: "http://" + proxyAddr, key: key},
		metric: "http://" + metricsAddr + "/metrics",
		token:  token,
	}
	jobs := []prometheus.Job{{Name: "sandbox-e2b", MetricsURL: s.metric}}
	for _, n := range s.nodes {
		jobs = append(jobs, prometheus.Job{Name: "sandboxd-" + n.name, MetricsURL: "http://" + n.addr + "/metrics", Bearer: token})
	}
	s.prom = prometheus.Start(t, filepath.Join(dir, "prometheus"), prometheus.Config{Jobs: jobs, RuleFiles: []string{renderAlertRules(t, dir)}})
	return s
}

// workload runs traffic rounds for trafficFor, then a template build: one
// of each thing the dashboard shows, over long enough for its rates.
func (s *system) workload(t *testing.T, ctx context.Context) {
	t.Helper()
	for start := time.Now(); time.Since(start) < trafficFor; {
		s.traffic(t, ctx)
	}
	s.build(t, ctx)
}

// trafficFor is how long the workload's traffic runs: several of
// Prometheus's 1 s scrapes, so a rate has points to draw.
const trafficFor = 20 * time.Second

// traffic does, through the e2b API and the data plane: creates, a list,
// a pause and a resume, envd calls through the data plane, a relay to a
// port nothing listens on, a refused create and kills.
func (s *system) traffic(t *testing.T, ctx context.Context) {
	t.Helper()
	var sbs []sandboxRef
	for range 3 {
		var c sandboxRef
		s.e2b.must(t, ctx, http.MethodPost, "/sandboxes", `{"templateID":"base","allow_internet_access":false}`, http.StatusCreated, &c)
		sbs = append(sbs, c)
	}
	s.e2b.must(t, ctx, http.MethodGet, "/v2/sandboxes", nil, http.StatusOK, nil)
	one := sbs[0].ID
	for range 5 {
		status, err := s.e2b.envdHealth(ctx, sbs[0])
		if err != nil || status/100 != 2 {
			t.Fatalf("envd /health through the data plane: %d %v", status, err)
		}
	}
	s.e2b.must(t, ctx, http.MethodPost, "/sandboxes/"+one+"/pause", nil, http.StatusNoContent, nil)
	s.e2b.must(t, ctx, http.MethodPost, "/sandboxes/"+one+"/resume", `{}`, http.StatusCreated, nil)
	s.e2b.must(t, ctx, http.MethodPost, "/sandboxes", `{"templateID":`, http.StatusBadRequest, nil)
	// A sandbox nothing listens in: the relay's dial fails (not_listening).
	if status, err := s.e2b.envdPort(ctx, sbs[1], 1); err != nil || status != http.StatusBadGateway {
		t.Fatalf("a port nothing listens on answered %d %v, want 502", status, err)
	}
	for _, c := range sbs {
		s.e2b.must(t, ctx, http.MethodDelete, "/sandboxes/"+c.ID, nil, http.StatusNoContent, nil)
	}
}

// build snapshots a sandbox, then builds a template from the base one
// through the build API.
func (s *system) build(t *testing.T, ctx context.Context) {
	t.Helper()
	var sb sandboxRef
	s.e2b.must(t, ctx, http.MethodPost, "/sandboxes", `{"templateID":"base","allow_internet_access":false}`, http.StatusCreated, &sb)
	s.e2b.must(t, ctx, http.MethodPost, "/sandboxes/"+sb.ID+"/snapshots", `{"name":"monitoring"}`, http.StatusCreated, nil)
	s.e2b.must(t, ctx, http.MethodDelete, "/sandboxes/"+sb.ID, nil, http.StatusNoContent, nil)

	var built struct {
		TemplateID string `json:"templateID"`
		BuildID    string `json:"buildID"`
	}
	s.e2b.must(t, ctx, http.MethodPost, "/v3/templates", `{"name":"monitoring-tpl"}`, http.StatusAccepted, &built)
	s.e2b.must(t, ctx, http.MethodPost, "/v2/templates/"+built.TemplateID+"/builds/"+built.BuildID, `{"fromTemplate":"base","steps":[]}`, http.StatusAccepted, nil)
	s.e2b.waitBuild(t, ctx, built.TemplateID, built.BuildID)
}

// TestDashboardPanelsHaveData: after the workload, every query of every
// panel of the chart's dashboard returns data from a real Prometheus,
// except the panels of what only the Kubernetes install runs (the
// warm-pool driver, name holds, the APIService), which this system does
// not have: TestKubernetesPanelsHaveData checks those.
func TestDashboardPanelsHaveData(t *testing.T) {
	s := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s.prom.WaitScraping(t, ctx, 1+len(s.nodes))
	start := time.Now()
	s.workload(t, ctx)

	panels := dashboardPanels(t)
	if len(panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	checked := 0
	for _, p := range panels {
		if kubernetesOnly(p.Expr) {
			continue
		}
		checked++
		poll.UntilNil(t, "panel "+p.Title+" to have data", func() error { return s.prom.HasData(ctx, p) })
	}
	if checked == 0 {
		t.Fatal("every panel was skipped as Kubernetes-only")
	}
	t.Logf("%d of %d panel queries return data; the rest are the Kubernetes install's", checked, len(panels))
	writeDashboardPicture(t, ctx, s.prom, panels, start, time.Now())
}

// kubernetesOnlyMetrics are what only sandbox-apiserver (or kube-apiserver)
// exports.
var kubernetesOnlyMetrics = []string{"sandbox_operator_warmpool_", "sandbox_operator_name_hold_", "aggregator_", "apiserver_"}

func kubernetesOnly(expr string) bool {
	for _, m := range kubernetesOnlyMetrics {
		if strings.Contains(expr, m) {
			return true
		}
	}
	return false
}

// TestPoolBelowTargetAlertFiresAndResolves: a node killed takes its warm
// VMs out of the pool while its target stays: the chart's pool alert
// fires in Prometheus; the node started again refills its pool and the
// alert resolves.
func TestPoolBelowTargetAlertFiresAndResolves(t *testing.T) {
	s := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const alert = "SandboxPoolBelowTarget"

	// The pools fill at start; the alert must be quiet once they have.
	poll.UntilNil(t, "Prometheus to see both nodes fresh, the pools full and "+alert+" quiet", func() error {
		if err := s.prom.Expect(ctx, `sandbox_operator_nodes{state="fresh"}`, 2); err != nil {
			return err
		}
		if err := s.prom.Expect(ctx, `sum(sandbox_operator_pool_target) - sum(sandbox_operator_pool_warm)`, 0); err != nil {
			return err
		}
		return s.prom.ExpectFiring(ctx, alert, false)
	})

	s.nodes[1].kill()
	poll.UntilNil(t, alert+" to fire after a node was killed", func() error {
		return s.prom.ExpectFiring(ctx, alert, true)
	})

	s.nodes[1].restart()
	poll.UntilNil(t, alert+" to resolve once the node is back and refilled", func() error {
		return s.prom.ExpectFiring(ctx, alert, false)
	})
}
