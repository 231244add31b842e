package chart_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
)

// Value sets that turn on each part of the monitoring values.
const (
	serviceMonitorOn = "monitoring.serviceMonitor.enabled=true"
	prometheusRuleOn = "monitoring.prometheusRule.enabled=true"
	dashboardOn      = "monitoring.grafanaDashboard.enabled=true"
)

// monitoringSets turns every part on, over the e2b values (the envd proxy's
// ServiceMonitor exists only with the proxy), and binds the metrics reader.
var monitoringSets = with(e2bSets,
	serviceMonitorOn, prometheusRuleOn, dashboardOn,
	"monitoring.serviceMonitor.prometheusServiceAccount.name=kube-prometheus-stack-prometheus",
	"monitoring.serviceMonitor.prometheusServiceAccount.namespace=monitoring")

// monitoringObjects are what monitoringSets adds to the e2b render.
var monitoringObjects = []string{
	"ClusterRole//sandbox-operator-metrics-reader",
	"ClusterRoleBinding//sandbox-operator-metrics-reader",
	"ConfigMap/" + releaseNamespace + "/sandbox-operator-dashboard",
	"PrometheusRule/" + releaseNamespace + "/sandbox-operator",
	"Service/" + releaseNamespace + "/sandbox-envd-proxy-metrics",
	"ServiceMonitor/" + releaseNamespace + "/sandbox-apiserver",
	"ServiceMonitor/" + releaseNamespace + "/sandbox-envd-proxy",
}

// monitoringKinds are kinds only the monitoring values render.
var monitoringKinds = []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"}

// alertNames are the alerts of the group sandbox-operator, in file order;
// docs/operations.md has a section for each.
var alertNames = []string{
	"SandboxPoolBelowTarget",
	"SandboxClaimLatencyHigh",
	"SandboxNodeSilent",
	"SandboxInventoryStale",
	"SandboxDataPlaneErrors",
	"SandboxBuildsStuck",
	"SandboxAPIServiceUnavailable",
}

// TestMonitoringOffRendersNothing: with the monitoring parts off (the
// default), whatever else is set under monitoring, no monitoring object is
// rendered and the envd proxy opens no metrics listener.
func TestMonitoringOffRendersNothing(t *testing.T) {
	for name, sets := range map[string][]string{
		"default": nil,
		"e2b":     e2bSets,
		"e2b with unused monitoring values": with(e2bSets,
			"monitoring.serviceMonitor.prometheusServiceAccount.name=prometheus",
			"monitoring.serviceMonitor.prometheusServiceAccount.namespace=monitoring",
			"monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
			"monitoring.serviceMonitor.envdProxyMetricsPort=8443",
			"monitoring.prometheusRule.alerts.claimLatency.for=never",
			"monitoring.grafanaDashboard.labelKey="),
	} {
		t.Run(name, func(t *testing.T) {
			objs := mustRender(t, sets...)
			want := sorted(defaultObjects)
			if has(objs, "Deployment", "sandbox-envd-proxy") {
				want = sorted(defaultObjects, e2bObjects)
			}
			assertObjects(t, objs, want)
			for _, o := range objs {
				if slices.Contains(monitoringKinds, o.u.GetKind()) || strings.Contains(o.u.GetName(), "metrics") || strings.Contains(o.u.GetName(), "dashboard") {
					t.Errorf("monitoring off, yet %s is rendered", o.key())
				}
			}
			if !has(objs, "Deployment", "sandbox-envd-proxy") {
				return
			}
			c := container(t, find(t, objs, "Deployment", "sandbox-envd-proxy"))
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			for _, a := range args {
				if strings.HasPrefix(a, "--metrics-bind-address") {
					t.Errorf("monitoring off, yet the proxy gets %s: an unauthenticated listener nothing scrapes", a)
				}
			}
			if _, ok := containerPorts(t, c)["metrics"]; ok {
				t.Error("monitoring off, yet the proxy's container declares a metrics port")
			}
		})
	}
}

func TestMonitoringObjects(t *testing.T) {
	assertObjects(t, mustRender(t, monitoringSets...), sorted(defaultObjects, e2bObjects, monitoringObjects))

	// Without e2b there is no proxy to scrape; without a ServiceAccount
	// name nothing is bound.
	objs := mustRender(t, serviceMonitorOn, prometheusRuleOn, dashboardOn)
	assertObjects(t, objs, sorted(defaultObjects, []string{
		"ClusterRole//sandbox-operator-metrics-reader",
		"ConfigMap/" + releaseNamespace + "/sandbox-operator-dashboard",
		"PrometheusRule/" + releaseNamespace + "/sandbox-operator",
		"ServiceMonitor/" + releaseNamespace + "/sandbox-apiserver",
	}))

	// Each part alone renders only its own objects.
	for part, want := range map[string][]string{
		serviceMonitorOn: {
			"ClusterRole//sandbox-operator-metrics-reader",
			"Service/" + releaseNamespace + "/sandbox-envd-proxy-metrics",
			"ServiceMonitor/" + releaseNamespace + "/sandbox-apiserver",
			"ServiceMonitor/" + releaseNamespace + "/sandbox-envd-proxy",
		},
		prometheusRuleOn: {"PrometheusRule/" + releaseNamespace + "/sandbox-operator"},
		dashboardOn:      {"ConfigMap/" + releaseNamespace + "/sandbox-operator-dashboard"},
	} {
		t.Run(part, func(t *testing.T) {
			assertObjects(t, mustRender(t, with(e2bSets, part)...), sorted(defaultObjects, e2bObjects, want))
		})
	}
}

// TestServiceMonitorsSelectTheirServices follows each ServiceMonitor to what
// prometheus-operator would scrape: the Services its selector matches in the
// namespaces it names (exactly one), the named port on that Service, the
// Service's target port on the pods the Service selects, and the binary
// listening there.
func TestServiceMonitorsSelectTheirServices(t *testing.T) {
	for name, sets := range map[string][]string{
		"e2b":                  monitoringSets,
		"proxy load balancer":  with(monitoringSets, "envdProxy.service.type=LoadBalancer", "envdProxy.tlsSecretName=wildcard"),
		"another metrics port": with(monitoringSets, "monitoring.serviceMonitor.envdProxyMetricsPort=9102"),
		"apiserver only":       {serviceMonitorOn},
	} {
		t.Run(name, func(t *testing.T) {
			objs := mustRender(t, sets...)
			for _, tc := range []struct {
				monitor, service, deployment, scheme string
			}{
				{"sandbox-apiserver", "sandbox-apiserver", "sandbox-apiserver", "https"},
				{"sandbox-envd-proxy", "sandbox-envd-proxy-metrics", "sandbox-envd-proxy", "http"},
			} {
				if !has(objs, "Deployment", tc.deployment) {
					if has(objs, "ServiceMonitor", tc.monitor) {
						t.Errorf("ServiceMonitor %s rendered without the Deployment %s", tc.monitor, tc.deployment)
					}
					continue
				}
				sm := find(t, objs, "ServiceMonitor", tc.monitor)
				svc := selectedService(t, objs, sm)
				if svc.GetName() != tc.service {
					t.Errorf("ServiceMonitor %s selects Service %s, want %s", tc.monitor, svc.GetName(), tc.service)
				}
				if typ, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); typ != "ClusterIP" {
					t.Errorf("Service %s is %s; metrics stay inside the cluster (ClusterIP)", svc.GetName(), typ)
				}
				endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				if len(endpoints) != 1 {
					t.Fatalf("ServiceMonitor %s has %d endpoints, want 1", tc.monitor, len(endpoints))
				}
				ep := endpoints[0].(map[string]any)
				if ep["scheme"] != tc.scheme || ep["path"] != "/metrics" {
					t.Errorf("ServiceMonitor %s scrapes %v %v, want %s /metrics", tc.monitor, ep["scheme"], ep["path"], tc.scheme)
				}
				targetPort := servicePortTarget(t, svc, ep["port"])
				d := find(t, objs, "Deployment", tc.deployment)
				assertSelects(t, svc, d)
				port, ok := containerPorts(t, container(t, d))[targetPort]
				if !ok {
					t.Fatalf("Service %s targets port %q, which Deployment %s's container does not declare", svc.GetName(), targetPort, tc.deployment)
				}
				args, _, _ := unstructured.NestedStringSlice(container(t, d), "args")
				listen := map[string]string{"https": "--secure-port=", "http": "--metrics-bind-address=:"}[tc.scheme]
				if !slices.Contains(args, listen+strconv.FormatInt(port, 10)) {
					t.Errorf("%s's container port %s is %d, but its args %q do not listen there (%s%d)", tc.deployment, targetPort, port, args, listen, port)
				}
			}
		})
	}
}

// TestApiserverScrapeAuth: Prometheus scrapes the apiserver with its own
// ServiceAccount token, verifies the serving certificate for the Service's
// name against the CA cert-manager writes, and may GET /metrics.
func TestApiserverScrapeAuth(t *testing.T) {
	objs := mustRender(t, monitoringSets...)
	sm := find(t, objs, "ServiceMonitor", "sandbox-apiserver")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ep := endpoints[0].(map[string]any)
	if ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("bearerTokenFile = %v, want the Prometheus pod's own ServiceAccount token", ep["bearerTokenFile"])
	}
	serverName, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
	cert := find(t, objs, "Certificate", "sandbox-apiserver-serving")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if serverName == "" || !slices.Contains(dnsNames, serverName) {
		t.Errorf("tlsConfig.serverName %q is not a name of the serving certificate %v", serverName, dnsNames)
	}
	caSecret, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
	caKey, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "key")
	certSecret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	if caSecret != certSecret || caKey != "ca.crt" {
		t.Errorf("tlsConfig.ca is %s/%s, want the serving certificate's Secret %s, key ca.crt", caSecret, caKey, certSecret)
	}

	// apiserverTLSConfig replaces the whole tlsConfig.
	objs = mustRender(t, serviceMonitorOn, "monitoring.serviceMonitor.apiserverTLSConfig.insecureSkipVerify=true")
	endpoints, _, _ = unstructured.NestedSlice(find(t, objs, "ServiceMonitor", "sandbox-apiserver").Object, "spec", "endpoints")
	if tls := endpoints[0].(map[string]any)["tlsConfig"]; fmt.Sprint(tls) != "map[insecureSkipVerify:true]" {
		t.Errorf("tlsConfig with apiserverTLSConfig set = %v, want exactly that value", tls)
	}

	role := find(t, mustRender(t, monitoringSets...), "ClusterRole", "sandbox-operator-metrics-reader")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if fmt.Sprint(rules) != "[map[nonResourceURLs:[/metrics] verbs:[get]]]" {
		t.Errorf("metrics-reader rules = %v, want only get on /metrics", rules)
	}
	binding := find(t, mustRender(t, monitoringSets...), "ClusterRoleBinding", "sandbox-operator-metrics-reader")
	if ref, _, _ := unstructured.NestedString(binding.Object, "roleRef", "name"); ref != "sandbox-operator-metrics-reader" {
		t.Errorf("binding refers to %s", ref)
	}
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if fmt.Sprint(subjects) != "[map[kind:ServiceAccount name:kube-prometheus-stack-prometheus namespace:monitoring]]" {
		t.Errorf("binding subjects = %v, want the ServiceAccount from the values", subjects)
	}
}

func TestServiceMonitorValues(t *testing.T) {
	objs := mustRender(t, with(monitoringSets,
		"monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
		"monitoring.serviceMonitor.interval=15s",
		"monitoring.serviceMonitor.scrapeTimeout=5s")...)
	for _, name := range []string{"sandbox-apiserver", "sandbox-envd-proxy"} {
		sm := find(t, objs, "ServiceMonitor", name)
		if got := sm.GetLabels()["release"]; got != "kube-prometheus-stack" {
			t.Errorf("ServiceMonitor %s label release = %q, want the value from monitoring.serviceMonitor.labels", name, got)
		}
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		ep := endpoints[0].(map[string]any)
		if ep["interval"] != "15s" || ep["scrapeTimeout"] != "5s" {
			t.Errorf("ServiceMonitor %s interval %v timeout %v, want 15s and 5s", name, ep["interval"], ep["scrapeTimeout"])
		}
		ns, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
		if !slices.Equal(ns, []string{releaseNamespace}) {
			t.Errorf("ServiceMonitor %s looks in namespaces %v, want only the release's", name, ns)
		}
	}
}

// TestPrometheusRule checks the alert group's shape: every alert, with a
// severity, a summary, a description and a runbook in docs/operations.md;
// and that the values reach the rules.
func TestPrometheusRule(t *testing.T) {
	rule := find(t, mustRender(t, prometheusRuleOn), "PrometheusRule", "sandbox-operator")
	groups := ruleGroups(t, rule)
	if len(groups) != 1 || groups[0].Name != "sandbox-operator" {
		t.Fatalf("PrometheusRule groups %+v, want the one group sandbox-operator", groups)
	}
	var names []string
	for _, r := range groups[0].Rules {
		names = append(names, r.Alert)
		if r.Expr == "" || r.For == "" {
			t.Errorf("%s has expr %q and for %q; both are needed", r.Alert, r.Expr, r.For)
		}
		if r.Labels["severity"] == "" {
			t.Errorf("%s has no severity label", r.Alert)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s has no %s", r.Alert, a)
			}
		}
		want := "https://github.com/cocoonstack/sandbox-operator/blob/main/docs/operations.md#" + strings.ToLower(r.Alert)
		if r.Annotations["runbook_url"] != want {
			t.Errorf("%s runbook_url = %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if got := slices.Sorted(maps.Keys(r.Annotations)); !slices.Equal(got, []string{"description", "runbook_url", "summary"}) {
			t.Errorf("%s has annotations %v", r.Alert, got)
		}
		assertKnownMetrics(t, r.Alert, r.Expr)
	}
	if !slices.Equal(names, alertNames) {
		t.Errorf("alerts %v, want %v", names, alertNames)
	}

	// The defaults, as docs/operations.md states them.
	byName := rulesByName(groups[0].Rules)
	for alert, want := range map[string]struct{ for_, severity, exprHas string }{
		"SandboxPoolBelowTarget":       {"10m", "warning", "sandbox_operator_pool_target"},
		"SandboxClaimLatencyHigh":      {"10m", "warning", `{outcome="claimed"}[5m]`},
		"SandboxNodeSilent":            {"5m", "warning", `sandbox_operator_nodes{state="silent"} > 0`},
		"SandboxInventoryStale":        {"5m", "warning", "sandbox_operator_inventory_age_seconds) > 300"},
		"SandboxDataPlaneErrors":       {"10m", "warning", "> 0.05"},
		"SandboxBuildsStuck":           {"10m", "warning", "[30m]"},
		"SandboxAPIServiceUnavailable": {"5m", "critical", `aggregator_unavailable_apiservice{name="v1beta1.agents.x-k8s.io"}`},
	} {
		r := byName[alert]
		if r.For != want.for_ || r.Labels["severity"] != want.severity || !strings.Contains(r.Expr, want.exprHas) {
			t.Errorf("%s: for %q severity %q expr %q; want %s, %s and an expr with %q", alert, r.For, r.Labels["severity"], r.Expr, want.for_, want.severity, want.exprHas)
		}
	}
	if expr := byName["SandboxClaimLatencyHigh"].Expr; !strings.Contains(expr, "histogram_quantile(0.99") || !strings.HasSuffix(expr, "> 2") {
		t.Errorf("SandboxClaimLatencyHigh expr %q, want the p99 above 2", expr)
	}

	// Every value reaches its rule.
	rule = find(t, mustRender(t, prometheusRuleOn,
		"monitoring.prometheusRule.labels.release=kube-prometheus-stack",
		"monitoring.prometheusRule.runbookBaseURL=https://runbooks.example.com/sandboxes",
		"monitoring.prometheusRule.alerts.poolBelowTarget.for=30m",
		"monitoring.prometheusRule.alerts.poolBelowTarget.severity=info",
		"monitoring.prometheusRule.alerts.claimLatency.p99Seconds=0.5",
		"monitoring.prometheusRule.alerts.claimLatency.window=10m",
		"monitoring.prometheusRule.alerts.claimLatency.for=15m",
		"monitoring.prometheusRule.alerts.nodeSilent.for=1m",
		"monitoring.prometheusRule.alerts.inventoryStale.maxAgeSeconds=600",
		"monitoring.prometheusRule.alerts.inventoryStale.for=2m",
		"monitoring.prometheusRule.alerts.dataPlaneErrors.ratio=0.01",
		"monitoring.prometheusRule.alerts.dataPlaneErrors.window=2m",
		"monitoring.prometheusRule.alerts.dataPlaneErrors.for=3m",
		"monitoring.prometheusRule.alerts.buildsStuck.window=1h30m",
		"monitoring.prometheusRule.alerts.buildsStuck.for=20m",
		"monitoring.prometheusRule.alerts.apiServiceUnavailable.for=1m",
		"monitoring.prometheusRule.alerts.apiServiceUnavailable.severity=page",
	), "PrometheusRule", "sandbox-operator")
	if got := rule.GetLabels()["release"]; got != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule label release = %q, want the value from monitoring.prometheusRule.labels", got)
	}
	byName = rulesByName(ruleGroups(t, rule)[0].Rules)
	for alert, want := range map[string]struct {
		for_, severity string
		exprHas        []string
	}{
		"SandboxPoolBelowTarget":       {"30m", "info", nil},
		"SandboxClaimLatencyHigh":      {"15m", "warning", []string{"[10m]", "> 0.5"}},
		"SandboxNodeSilent":            {"1m", "warning", nil},
		"SandboxInventoryStale":        {"2m", "warning", []string{"> 600"}},
		"SandboxDataPlaneErrors":       {"3m", "warning", []string{"[2m]", "> 0.01"}},
		"SandboxBuildsStuck":           {"20m", "warning", []string{"[1h30m]"}},
		"SandboxAPIServiceUnavailable": {"1m", "page", nil},
	} {
		r := byName[alert]
		if r.For != want.for_ || r.Labels["severity"] != want.severity {
			t.Errorf("%s: for %q severity %q, want %s and %s", alert, r.For, r.Labels["severity"], want.for_, want.severity)
		}
		for _, s := range want.exprHas {
			if !strings.Contains(r.Expr, s) {
				t.Errorf("%s expr %q lacks %q", alert, r.Expr, s)
			}
		}
		if !strings.HasPrefix(r.Annotations["runbook_url"], "https://runbooks.example.com/sandboxes#") {
			t.Errorf("%s runbook_url %q ignores runbookBaseURL", alert, r.Annotations["runbook_url"])
		}
	}
}

// TestPrometheusRuleIsTheAlertsFile: the PrometheusRule's spec is
// files/alerts.yaml rendered, and nothing else, so the plain rules file and
// the PrometheusRule cannot drift apart.
func TestPrometheusRuleIsTheAlertsFile(t *testing.T) {
	raw, err := fs.ReadFile(sandboxchart.Files, sandboxchart.AlertsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "- alert: SandboxPoolBelowTarget") {
		t.Fatalf("%s does not hold the alerts", sandboxchart.AlertsPath)
	}
	rule := find(t, mustRender(t, prometheusRuleOn), "PrometheusRule", "sandbox-operator")
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	if got := slices.Sorted(maps.Keys(spec)); !slices.Equal(got, []string{"groups"}) {
		t.Errorf("PrometheusRule spec has %v, want only groups: a Prometheus rules file", got)
	}
	// The annotations keep Prometheus's own templates, which tpl must not
	// have eaten.
	for _, r := range ruleGroups(t, rule)[0].Rules {
		if r.Alert == "SandboxPoolBelowTarget" && !strings.Contains(r.Annotations["summary"], "{{ $labels.template }}") {
			t.Errorf("summary %q lost Prometheus's {{ $labels.template }}", r.Annotations["summary"])
		}
	}
}

func TestGrafanaDashboardConfigMap(t *testing.T) {
	objs := mustRender(t, dashboardOn)
	cm := find(t, objs, "ConfigMap", "sandbox-operator-dashboard")
	if got := cm.GetLabels()["grafana_dashboard"]; got != "1" {
		t.Errorf("label grafana_dashboard = %q, want \"1\" (the sidecar's default)", got)
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if len(data) != 1 {
		t.Fatalf("dashboard ConfigMap has keys %v, want one", slices.Collect(maps.Keys(data)))
	}
	for key, value := range data {
		if !strings.HasSuffix(key, ".json") {
			t.Errorf("dashboard key %q does not end in .json; the sidecar skips it", key)
		}
		file, err := fs.ReadFile(sandboxchart.Files, sandboxchart.DashboardPath)
		if err != nil {
			t.Fatal(err)
		}
		if value != strings.TrimSuffix(string(file), "\n") {
			t.Errorf("the ConfigMap's %s differs from %s", key, sandboxchart.DashboardPath)
		}
	}

	objs = mustRender(t, dashboardOn,
		"monitoring.grafanaDashboard.labelKey=dashboards.example.com/load",
		"monitoring.grafanaDashboard.labelValue=yes",
		"monitoring.grafanaDashboard.namespace=grafana",
		"monitoring.grafanaDashboard.annotations.grafana_folder=Sandboxes")
	cm = find(t, objs, "ConfigMap", "sandbox-operator-dashboard")
	if got := cm.GetLabels()["dashboards.example.com/load"]; got != "yes" {
		t.Errorf("configured label = %q, want yes", got)
	}
	if _, ok := cm.GetLabels()["grafana_dashboard"]; ok {
		t.Error("the default label is still set with another labelKey")
	}
	if cm.GetNamespace() != "grafana" {
		t.Errorf("dashboard namespace %q, want grafana", cm.GetNamespace())
	}
	if got := cm.GetAnnotations()["grafana_folder"]; got != "Sandboxes" {
		t.Errorf("annotation grafana_folder = %q", got)
	}
}

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int           `json:"id"`
		Title      string        `json:"title"`
		Type       string        `json:"type"`
		Datasource panelDatasrc  `json:"datasource"`
		Targets    []panelTarget `json:"targets"`
	} `json:"panels"`
}

type panelDatasrc struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panelTarget struct {
	Datasource panelDatasrc `json:"datasource"`
	Expr       string       `json:"expr"`
	RefID      string       `json:"refId"`
}

// TestDashboardJSON parses the dashboard and checks every panel queries the
// datasource variable with PromQL over this project's metrics only, and that
// the panels cover what operators watch.
func TestDashboardJSON(t *testing.T) {
	raw, err := fs.ReadFile(sandboxchart.Files, sandboxchart.DashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not JSON: %v", sandboxchart.DashboardPath, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q; the sidecar needs a stable uid", d.UID, d.Title)
	}
	var datasource bool
	for _, v := range d.Templating.List {
		datasource = datasource || (v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus")
	}
	if !datasource {
		t.Errorf("no datasource variable of the prometheus type among %+v", d.Templating.List)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" || p.Type == "" {
			t.Errorf("panel %d has title %q type %q", p.ID, p.Title, p.Type)
		}
		if p.Datasource != (panelDatasrc{Type: "prometheus", UID: "${datasource}"}) {
			t.Errorf("panel %q queries %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
				continue
			}
			if tg.Datasource != p.Datasource {
				t.Errorf("panel %q target %s queries %+v, not the panel's datasource", p.Title, tg.RefID, tg.Datasource)
			}
			for _, m := range assertKnownMetrics(t, "panel "+strconv.Quote(p.Title), tg.Expr) {
				used[m] = true
			}
		}
	}
	// What the dashboard is for: one panel or more over each of these.
	for _, m := range []string{
		"sandbox_operator_claims_total",
		"sandbox_operator_claim_duration_seconds_bucket",
		"sandbox_operator_pool_warm",
		"sandbox_operator_pool_target",
		"sandbox_operator_nodes",
		"sandbox_operator_inventory_age_seconds",
		"sandbox_operator_lifecycle_operations_total",
		"sandbox_operator_refusals_total",
		"sandbox_operator_dataplane_requests_total",
		"sandbox_operator_dataplane_relay_dial_duration_seconds_bucket",
		"sandbox_operator_dataplane_relay_dial_failures_total",
		"sandbox_operator_dataplane_open_streams",
		"sandbox_operator_builds_total",
		"sandbox_operator_build_queue_length",
		"sandbox_operator_warmpool_reconciles_total",
		"sandbox_operator_warmpool_node_pushes_total",
		"sandbox_operator_warmpool_leader",
	} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// knownMetrics are the series the alerts and the dashboard may query: the
// metric catalogue of docs/operations.md (histograms by their _bucket
// series), and the kube-apiserver's aggregator metric. A name outside it is a
// typo, or a metric this project does not export.
var knownMetrics = map[string]bool{
	"sandbox_operator_claims_total":                                 true,
	"sandbox_operator_claim_duration_seconds_bucket":                true,
	"sandbox_operator_pool_warm":                                    true,
	"sandbox_operator_pool_target":                                  true,
	"sandbox_operator_pool_nodes_below_target":                      true,
	"sandbox_operator_nodes":                                        true,
	"sandbox_operator_inventory_age_seconds":                        true,
	"sandbox_operator_lifecycle_operations_total":                   true,
	"sandbox_operator_lifecycle_operation_duration_seconds_bucket":  true,
	"sandbox_operator_refusals_total":                               true,
	"sandbox_operator_list_duration_seconds_bucket":                 true,
	"sandbox_operator_list_items_bucket":                            true,
	"sandbox_operator_dataplane_requests_total":                     true,
	"sandbox_operator_dataplane_bytes_total":                        true,
	"sandbox_operator_dataplane_relay_dial_duration_seconds_bucket": true,
	"sandbox_operator_dataplane_relay_dial_failures_total":          true,
	"sandbox_operator_dataplane_open_streams":                       true,
	"sandbox_operator_builds_total":                                 true,
	"sandbox_operator_build_duration_seconds_bucket":                true,
	"sandbox_operator_build_queue_length":                           true,
	"sandbox_operator_builds_running":                               true,
	"sandbox_operator_warmpool_reconciles_total":                    true,
	"sandbox_operator_warmpool_reconcile_duration_seconds_bucket":   true,
	"sandbox_operator_warmpool_node_pushes_total":                   true,
	"sandbox_operator_warmpool_leader":                              true,
	"sandbox_operator_name_hold_waits_total":                        true,
	"sandbox_operator_name_hold_conflicts_total":                    true,
	"aggregator_unavailable_apiservice":                             true,
}

// The PromQL vocabulary the queries use besides metric names: functions
// and aggregations (followed by a parenthesis) and keywords.
var (
	promqlFunctions = []string{"sum", "max", "min", "avg", "count", "rate", "increase", "histogram_quantile", "clamp_min"}
	promqlKeywords  = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
)

var (
	// Label matchers, range and subquery selectors, and the label lists of
	// by/without/on/ignoring clauses carry label names, not metrics.
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlLabelList = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlStrings   = regexp.MustCompile(`"[^"]*"`)
	promqlIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
)

// assertKnownMetrics fails the test for a metric name in expr outside
// knownMetrics, or an expression naming none, and returns the names. It is
// a lexer, not a parser: promtool parses the alerts, and Grafana's queries
// are the same PromQL.
func assertKnownMetrics(t *testing.T, where, expr string) []string {
	t.Helper()
	stripped := promqlStrings.ReplaceAllString(expr, `""`)
	stripped = promqlMatchers.ReplaceAllString(stripped, " ")
	stripped = promqlRanges.ReplaceAllString(stripped, " ")
	stripped = promqlLabelList.ReplaceAllString(stripped, " ")
	var metrics []string
	for _, tok := range promqlIdent.FindAllString(stripped, -1) {
		name, call := strings.CutSuffix(tok, "(")
		name = strings.TrimSpace(name)
		switch {
		case call && slices.Contains(promqlFunctions, name):
		case call:
			t.Errorf("%s: %q calls %s, a function this check does not know", where, expr, name)
		case slices.Contains(promqlKeywords, name):
		case knownMetrics[name]:
			metrics = append(metrics, name)
		default:
			t.Errorf("%s: %q queries %s, which is not a metric of the catalogue (sandbox_operator_*, sandboxd_*, aggregator_*)", where, expr, name)
		}
	}
	if len(metrics) == 0 {
		t.Errorf("%s: %q queries no metric", where, expr)
	}
	return metrics
}

// alertRule is one rule of the rendered group.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroup struct {
	Name  string      `json:"name"`
	Rules []alertRule `json:"rules"`
}

// ruleGroups decodes a PrometheusRule's groups strictly: a field Prometheus
// does not know fails.
func ruleGroups(t *testing.T, rule *unstructured.Unstructured) []ruleGroup {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &out); err != nil {
		t.Fatalf("PrometheusRule %s spec: %v", rule.GetName(), err)
	}
	return out.Groups
}

func rulesByName(rules []alertRule) map[string]alertRule {
	out := map[string]alertRule{}
	for _, r := range rules {
		out[r.Alert] = r
	}
	return out
}

// TestMonitoringRefusals: a monitoring value that would make a broken object
// fails the render, with a message naming the value.
func TestMonitoringRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		msg  string
	}{
		{
			name: "service account without namespace",
			sets: []string{serviceMonitorOn, "monitoring.serviceMonitor.prometheusServiceAccount.name=prometheus"},
			msg:  "monitoring.serviceMonitor.prometheusServiceAccount.namespace is required when its name is set",
		},
		{
			name: "metrics port is the proxy's port",
			sets: with(e2bSets, serviceMonitorOn, "monitoring.serviceMonitor.envdProxyMetricsPort=8443"),
			msg:  "monitoring.serviceMonitor.envdProxyMetricsPort must differ from envdProxy.port",
		},
		{
			name: "metrics port out of range",
			sets: with(e2bSets, serviceMonitorOn, "monitoring.serviceMonitor.envdProxyMetricsPort=70000"),
			msg:  "monitoring.serviceMonitor.envdProxyMetricsPort must be a port number between 1 and 65535",
		},
		{
			name: "for not a duration",
			sets: []string{prometheusRuleOn, "monitoring.prometheusRule.alerts.poolBelowTarget.for=10 minutes"},
			msg:  `monitoring.prometheusRule.alerts.poolBelowTarget.for must be a Prometheus duration such as 5m, not "10 minutes"`,
		},
		{
			name: "empty for",
			sets: []string{prometheusRuleOn, "monitoring.prometheusRule.alerts.nodeSilent.for="},
			msg:  `monitoring.prometheusRule.alerts.nodeSilent.for must be a Prometheus duration such as 5m, not ""`,
		},
		{
			name: "window not a duration",
			sets: []string{prometheusRuleOn, "monitoring.prometheusRule.alerts.claimLatency.window=5"},
			msg:  `monitoring.prometheusRule.alerts.claimLatency.window must be a Prometheus duration such as 5m, not "5"`,
		},
		{
			name: "no severity",
			sets: []string{prometheusRuleOn, "monitoring.prometheusRule.alerts.buildsStuck.severity="},
			msg:  "monitoring.prometheusRule.alerts.buildsStuck.severity is required",
		},
		{
			name: "latency bound zero",
			sets: []string{prometheusRuleOn, "monitoring.prometheusRule.alerts.claimLatency.p99Seconds=0"},
			msg:  "monitoring.prometheusRule.alerts.claimLatency.p99Seconds must be a number above 0",
		},
		{
			name: "age bound not a number",
			sets: []string{prometheusRuleOn, "monitoring.prometheusRule.alerts.inventoryStale.maxAgeSeconds=5m"},
			msg:  "monitoring.prometheusRule.alerts.inventoryStale.maxAgeSeconds must be a number above 0",
		},
		{
			name: "ratio above one",
			sets: []string{prometheusRuleOn, "monitoring.prometheusRule.alerts.dataPlaneErrors.ratio=5"},
			msg:  "monitoring.prometheusRule.alerts.dataPlaneErrors.ratio is a share of requests: at most 1",
		},
		{
			name: "no runbook base",
			sets: []string{prometheusRuleOn, "monitoring.prometheusRule.runbookBaseURL="},
			msg:  "monitoring.prometheusRule.runbookBaseURL is required when monitoring.prometheusRule.enabled is true",
		},
		{
			name: "dashboard without label key",
			sets: []string{dashboardOn, "monitoring.grafanaDashboard.labelKey="},
			msg:  "monitoring.grafanaDashboard.labelKey is required when monitoring.grafanaDashboard.enabled is true",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.sets...)
			if err == nil {
				t.Fatalf("render succeeded, want the failure %q", tc.msg)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("render failed with %q, want %q", err, tc.msg)
			}
		})
	}
}

// selectedService returns the one Service a ServiceMonitor's selector
// matches in the namespaces it names.
func selectedService(t *testing.T, objs []object, sm *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if exprs, found, _ := unstructured.NestedSlice(sm.Object, "spec", "selector", "matchExpressions"); found && len(exprs) > 0 {
		t.Fatalf("ServiceMonitor %s uses matchExpressions, which this test does not evaluate", sm.GetName())
	}
	namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	if len(selector) == 0 || len(namespaces) == 0 {
		t.Fatalf("ServiceMonitor %s selects labels %v in namespaces %v; both must be set", sm.GetName(), selector, namespaces)
	}
	var matched []*unstructured.Unstructured
	for _, o := range objs {
		if o.u.GetKind() == "Service" && slices.Contains(namespaces, o.u.GetNamespace()) && labelsMatch(selector, o.u.GetLabels()) {
			matched = append(matched, o.u)
		}
	}
	if len(matched) != 1 {
		var names []string
		for _, m := range matched {
			names = append(names, m.GetName())
		}
		t.Fatalf("ServiceMonitor %s selects Services %v, want exactly one", sm.GetName(), names)
	}
	return matched[0]
}

// servicePortTarget returns the targetPort, a port name, of the Service
// port called name.
func servicePortTarget(t *testing.T, svc *unstructured.Unstructured, name any) string {
	t.Helper()
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	for _, p := range ports {
		m := p.(map[string]any)
		if m["name"] == name {
			target, ok := m["targetPort"].(string)
			if !ok {
				t.Fatalf("Service %s port %v targets %v, want a container port name", svc.GetName(), name, m["targetPort"])
			}
			return target
		}
	}
	t.Fatalf("Service %s has no port named %v", svc.GetName(), name)
	return ""
}

// assertSelects fails unless the Service's selector matches the
// Deployment's pods.
func assertSelects(t *testing.T, svc, d *unstructured.Unstructured) {
	t.Helper()
	selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	pod, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	if len(selector) == 0 || !labelsMatch(selector, pod) {
		t.Errorf("Service %s selects %v, which the pods of Deployment %s (%v) do not match", svc.GetName(), selector, d.GetName(), pod)
	}
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPorts maps a container's port names to their numbers.
func containerPorts(t *testing.T, c map[string]any) map[string]int64 {
	t.Helper()
	ports, _, _ := unstructured.NestedSlice(c, "ports")
	out := map[string]int64{}
	for _, p := range ports {
		m := p.(map[string]any)
		n, err := strconv.ParseInt(fmt.Sprint(m["containerPort"]), 10, 64)
		if err != nil {
			t.Fatalf("container port %v: %v", m, err)
		}
		out[fmt.Sprint(m["name"])] = n
	}
	return out
}
