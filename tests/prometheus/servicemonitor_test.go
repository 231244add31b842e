package prometheus_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cocoonstack/sandbox-operator/tests/chartrender"
	"github.com/cocoonstack/sandbox-operator/tests/prometheus"
)

// discovery is a Discovery over files in dir, whose Secrets hold a CA and
// whose every selection finds one pod, named after what it selected.
func discovery(t *testing.T, dir string) prometheus.Discovery {
	t.Helper()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return prometheus.Discovery{
		TokenFile: token, Dir: dir,
		Targets: func(namespaces []string, matchLabels map[string]string, port string) ([]prometheus.Target, error) {
			pod := fmt.Sprintf("%s.%s.%s", strings.Join(namespaces, ","), matchLabels["app.kubernetes.io/name"], port)
			return []prometheus.Target{{Address: "10.0.0.1:443", Namespace: namespaces[0], Service: "svc", Pod: pod}}, nil
		},
		Secret: func(namespace, name, key string) ([]byte, error) {
			return fmt.Appendf(nil, "CA of %s/%s[%s]\n", namespace, name, key), nil
		},
	}
}

// TestChartServiceMonitorsTranslate: the chart's ServiceMonitors become
// scrape configurations that promtool accepts, selecting by each
// Service's labels and port name, with the token and CA the endpoint
// asks for.
func TestChartServiceMonitorsTranslate(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed: the build's root has Debian's prometheus package: %v", err)
	}
	objs := chartrender.RenderSets(t, "sandbox-system",
		"apiserver.e2b.enabled=true",
		"apiserver.e2b.domain=sandbox.example.com",
		"apiserver.e2b.apiKeySecret.name=e2b-api-keys",
		"apiserver.e2b.envdSecret.secretName=e2b-envd-secret",
		"apiserver.sandboxdToken.secretName=sandboxd-token",
		"monitoring.serviceMonitor.enabled=true")
	dir := t.TempDir()
	d := discovery(t, dir)
	var configs strings.Builder
	monitors := 0
	for _, o := range objs {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		monitors++
		c, err := prometheus.ServiceMonitorScrapeConfigs(o, d)
		if err != nil {
			t.Fatal(err)
		}
		// The selection: the release's namespace, the Service's app
		// name and the port the Service names.
		want := map[string]string{"sandbox-apiserver": "sandbox-system.sandbox-apiserver.https", "sandbox-envd-proxy": "sandbox-system.sandbox-envd-proxy.metrics"}[o.GetName()]
		if want == "" || !strings.Contains(c, "pod: "+want) {
			t.Errorf("%s's scrape config does not select %q:\n%s", o.GetName(), want, c)
		}
		configs.WriteString(c)
	}
	if monitors != 2 {
		t.Fatalf("the chart rendered %d ServiceMonitors, want 2 (sandbox-apiserver, sandbox-envd-proxy)", monitors)
	}
	if !strings.Contains(configs.String(), "credentials_file: "+d.TokenFile) || !strings.Contains(configs.String(), "server_name: sandbox-apiserver.sandbox-system.svc") {
		t.Errorf("the apiserver's job lacks its token or server name:\n%s", configs.String())
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte("scrape_configs:\n"+configs.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", "--syntax-only", config).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s\n%s", err, out, configs.String())
	}
}

// TestServiceMonitorFieldsNotUnderstoodFail: a field the translation does
// not know (a relabeling, a selector expression) is an error, not dropped.
func TestServiceMonitorFieldsNotUnderstoodFail(t *testing.T) {
	d := discovery(t, t.TempDir())
	base := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
			"metadata": map[string]any{"name": "m", "namespace": "ns"},
			"spec": map[string]any{
				"selector":  map[string]any{"matchLabels": map[string]any{"app": "a"}},
				"endpoints": []any{map[string]any{"port": "metrics"}},
			},
		}}
	}
	if _, err := prometheus.ServiceMonitorScrapeConfigs(base(), d); err != nil {
		t.Fatalf("a plain ServiceMonitor: %v", err)
	}
	for name, mutate := range map[string]func(*unstructured.Unstructured){
		"endpoint relabelings": func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{"port": "metrics", "relabelings": []any{}}}, "spec", "endpoints")
		},
		"selector expressions": func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(o.Object, []any{}, "spec", "selector", "matchExpressions")
		},
		"no selector": func(o *unstructured.Unstructured) {
			unstructured.RemoveNestedField(o.Object, "spec", "selector")
		},
		"an endpoint without a port": func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{"path": "/metrics"}}, "spec", "endpoints")
		},
	} {
		o := base()
		mutate(o)
		if _, err := prometheus.ServiceMonitorScrapeConfigs(o, d); err == nil {
			t.Errorf("%s: translated, want an error", name)
		}
	}
}
