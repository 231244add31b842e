package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	prometheusoperatorcrds "github.com/cocoonstack/sandbox-operator/tests/testdata/prometheus-operator-crds"
)

// The scraper's identity: the ServiceAccount a Prometheus of a monitoring
// stack runs as, which the chart binds its metrics reader to.
const (
	PrometheusNamespace      = "monitoring"
	PrometheusServiceAccount = "prometheus"
)

// monitoringValues turn on the chart's monitoring objects, as a platform
// team with a stock prometheus-operator and Grafana's sidecar does. The
// scrape interval is short so a test sees rates within a minute.
var monitoringValues = []string{
	"--set", "monitoring.serviceMonitor.enabled=true",
	"--set", "monitoring.serviceMonitor.interval=2s",
	"--set", "monitoring.serviceMonitor.scrapeTimeout=2s",
	"--set", "monitoring.serviceMonitor.prometheusServiceAccount.name=" + PrometheusServiceAccount,
	"--set", "monitoring.serviceMonitor.prometheusServiceAccount.namespace=" + PrometheusNamespace,
	"--set", "monitoring.prometheusRule.enabled=true",
	"--set", "monitoring.grafanaDashboard.enabled=true",
}

// installMonitoringStack puts in place what a monitoring stack brings
// before the chart's monitoring objects can be installed: the
// prometheus-operator CRDs and the Prometheus's ServiceAccount.
func (s *Stack) installMonitoringStack(ctx context.Context) error {
	dir := filepath.Join(s.dir, "prometheus-operator-crds")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var names []string
	for i, m := range prometheusoperatorcrds.Manifests() {
		file := filepath.Join(dir, fmt.Sprintf("crd-%d.yaml", i))
		if err := os.WriteFile(file, m, 0o600); err != nil {
			return err
		}
		// Server-side: the CRDs are larger than the annotation a
		// client-side apply writes.
		if _, err := s.Kubectl(ctx, "apply", "--server-side", "-f", file); err != nil {
			return err
		}
		names = append(names, file)
	}
	if _, err := s.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"); err != nil {
		return fmt.Errorf("prometheus-operator CRDs (%s): %w", strings.Join(names, ", "), err)
	}
	for _, args := range [][]string{
		{"create", "namespace", PrometheusNamespace},
		{"-n", PrometheusNamespace, "create", "serviceaccount", PrometheusServiceAccount},
	} {
		if _, err := s.Kubectl(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// PrometheusToken is a token of the Prometheus's ServiceAccount, as a
// Prometheus pod would present from its projected volume.
func (s *Stack) PrometheusToken(ctx context.Context) (string, error) {
	out, err := s.Kubectl(ctx, "-n", PrometheusNamespace, "create", "token", PrometheusServiceAccount, "--duration=2h")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}
