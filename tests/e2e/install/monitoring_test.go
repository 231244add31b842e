package install_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/install"
	"github.com/cocoonstack/sandbox-operator/tests/prometheus"
)

var (
	serviceMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	prometheusRuleGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
)

// The monitoring objects the release installs (monitoring values on).
const (
	dashboardConfigMap = "sandbox-operator-dashboard"
	alertGroupRules    = 7
)

// startMonitoring runs a real Prometheus configured from what the release
// installed, as prometheus-operator would configure one in the cluster:
// a scrape job per endpoint of each ServiceMonitor (the pods behind the
// Services it selects, with the Prometheus ServiceAccount's token and the
// CA the ServiceMonitor names), the PrometheusRule's groups as its rules,
// and the kube-apiserver's /metrics as a monitoring stack scrapes it, with
// the same token. It returns once every target is scraped successfully:
// that proves the chart's metrics-reader binding lets the token in.
func startMonitoring(t *testing.T, ctx context.Context, st *install.Stack) *prometheus.Server {
	t.Helper()
	n := st.Node
	dir := filepath.Join(t.TempDir(), "prometheus")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	token, err := st.PrometheusToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "serviceaccount-token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	d := prometheus.Discovery{
		TokenFile: tokenFile,
		Dir:       dir,
		Secret: func(namespace, name, key string) ([]byte, error) {
			s, err := n.Clientset().CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			v, ok := s.Data[key]
			if !ok {
				return nil, fmt.Errorf("Secret %s/%s has no key %s", namespace, name, key)
			}
			return v, nil
		},
		Targets: func(namespaces []string, matchLabels map[string]string, port string) ([]prometheus.Target, error) {
			return readyTargets(ctx, st, namespaces, matchLabels, port)
		},
	}
	monitors, err := n.Dynamic().Resource(serviceMonitorGVR).Namespace(install.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list ServiceMonitors: %v", err)
	}
	if len(monitors.Items) != 2 {
		t.Fatalf("the release installed %d ServiceMonitors, want 2 (sandbox-apiserver, sandbox-envd-proxy)", len(monitors.Items))
	}
	var scrape strings.Builder
	for i := range monitors.Items {
		c, err := prometheus.ServiceMonitorScrapeConfigs(&monitors.Items[i], d)
		if err != nil {
			t.Fatal(err)
		}
		scrape.WriteString(c)
	}

	rules, err := n.Dynamic().Resource(prometheusRuleGVR).Namespace(install.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(rules.Items) != 1 {
		t.Fatalf("the release's PrometheusRules: %d, %v; want 1", len(rules.Items), err)
	}
	spec, _, err := unstructured.NestedMap(rules.Items[0].Object, "spec")
	if err != nil {
		t.Fatal(err)
	}
	ruleYAML, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ruleFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(ruleFile, ruleYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "kube-ca.crt")
	if err := os.WriteFile(caFile, n.CAData(), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := prometheus.Start(t, dir, prometheus.Config{
		Jobs:          []prometheus.Job{{Name: "apiserver", MetricsURL: n.Host() + "/metrics", Bearer: token, CAFile: caFile}},
		ScrapeConfigs: scrape.String(),
		RuleFiles:     []string{ruleFile},
	})
	// Each replica of both Deployments, and the kube-apiserver.
	want := 1
	for _, app := range []string{"sandbox-apiserver", "sandbox-envd-proxy"} {
		want += len(podNames(t, ctx, n, "app.kubernetes.io/name="+app))
	}
	prom.WaitScraping(t, ctx, want)
	t.Logf("Prometheus scrapes %d targets found from the release's ServiceMonitors and the kube-apiserver", want)
	return prom
}

// readyTargets lists what Prometheus's endpointslice role finds for a
// ServiceMonitor endpoint: the ready addresses of the port named port in
// the EndpointSlices of the Services in namespaces labelled matchLabels.
func readyTargets(ctx context.Context, st *install.Stack, namespaces []string, matchLabels map[string]string, port string) ([]prometheus.Target, error) {
	cs := st.Node.Clientset()
	var out []prometheus.Target
	for _, ns := range namespaces {
		svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(matchLabels).String()})
		if err != nil {
			return nil, err
		}
		for _, svc := range svcs.Items {
			slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
			if err != nil {
				return nil, err
			}
			for _, slice := range slices.Items {
				out = append(out, sliceTargets(slice, svc, port)...)
			}
		}
	}
	return out, nil
}

func sliceTargets(slice discoveryv1.EndpointSlice, svc corev1.Service, port string) []prometheus.Target {
	var out []prometheus.Target
	for _, p := range slice.Ports {
		if p.Name == nil || *p.Name != port || p.Port == nil {
			continue
		}
		for _, ep := range slice.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			pod := ""
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
				pod = ep.TargetRef.Name
			}
			for _, addr := range ep.Addresses {
				out = append(out, prometheus.Target{Address: fmt.Sprintf("%s:%d", addr, *p.Port), Namespace: svc.Namespace, Service: svc.Name, Pod: pod})
			}
		}
	}
	return out
}

// checkMonitoring: after the workload, every panel of the dashboard the
// release installed (its ConfigMap, labelled for Grafana's sidecar)
// returns data, the PrometheusRule's alerts are loaded and evaluate
// cleanly, and none fires on this healthy install.
func checkMonitoring(t *testing.T, ctx context.Context, st *install.Stack, prom *prometheus.Server) {
	t.Helper()
	cm, err := st.Node.Clientset().CoreV1().ConfigMaps(install.Namespace).Get(ctx, dashboardConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the dashboard ConfigMap: %v", err)
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s labels %v: Grafana's sidecar selects grafana_dashboard=1", cm.Name, cm.Labels)
	}
	panels, err := prometheus.Panels([]byte(cm.Data["sandbox-operator.json"]))
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", cm.Name, err)
	}
	for _, p := range panels {
		poll.UntilNil(t, "panel "+p.Title+" to have data", func() error { return prom.HasData(ctx, p) })
	}
	t.Logf("every one of the installed dashboard's %d panel queries returns data", len(panels))

	poll.UntilNil(t, "the PrometheusRule's alerts to be evaluated", func() error {
		groups, err := prom.Rules(ctx)
		if err != nil {
			return err
		}
		alerts := 0
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Type != "alerting" {
					continue
				}
				alerts++
				if r.Health != "ok" {
					return fmt.Errorf("alert %s: health %q %s", r.Name, r.Health, r.LastError)
				}
			}
		}
		if alerts != alertGroupRules {
			return fmt.Errorf("%d alerts loaded, want %d", alerts, alertGroupRules)
		}
		return nil
	})
	firing, err := prom.Query(ctx, `ALERTS{alertstate="firing"}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range firing {
		t.Errorf("alert %s fires on a healthy install: %v", a.Metric["alertname"], a.Metric)
	}
}
