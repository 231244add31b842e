package prometheus

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Discovery is what a Prometheus outside the cluster needs to find and
// scrape a ServiceMonitor's targets the way the Prometheus that
// prometheus-operator configures inside the cluster does. Debian's
// Prometheus is built without Kubernetes service discovery, so the
// caller discovers: Targets lists what Prometheus's endpointslice role
// would find.
type Discovery struct {
	// Targets returns the ready addresses (host:port) of the EndpointSlice
	// ports named port of the Services in namespaces whose labels hold
	// every one of matchLabels, each with its namespace, Service and pod.
	Targets func(namespaces []string, matchLabels map[string]string, port string) ([]Target, error)
	// TokenFile holds the scraping Prometheus's ServiceAccount token: what
	// a ServiceMonitor's bearerTokenFile names inside a Prometheus pod.
	TokenFile string
	// Secret reads one key of a Secret in the ServiceMonitor's namespace
	// (a tlsConfig's ca.secret).
	Secret func(namespace, name, key string) ([]byte, error)
	// Dir receives the files the configuration refers to (CAs).
	Dir string
}

// Target is one discovered address and what it belongs to.
type Target struct {
	Address, Namespace, Service, Pod string
}

// ServiceMonitorScrapeConfigs turns a monitoring.coreos.com/v1
// ServiceMonitor into Prometheus scrape configurations, one per endpoint,
// as scrape_configs list items indented for Config.ScrapeConfigs. Targets
// are what prometheus-operator's configuration finds: the EndpointSlice
// ports of the Services the selector picks, by the port's name, labelled
// with their namespace, Service, pod and endpoint, job being the Service.
// A field this translation does not know is an error, so a change to the
// chart's ServiceMonitors cannot pass the test unread.
func ServiceMonitorScrapeConfigs(sm *unstructured.Unstructured, d Discovery) (string, error) {
	where := "ServiceMonitor " + sm.GetNamespace() + "/" + sm.GetName()
	spec, _, err := unstructured.NestedMap(sm.Object, "spec")
	if err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	if err := knownKeys(spec, "namespaceSelector", "selector", "endpoints"); err != nil {
		return "", fmt.Errorf("%s: spec: %w", where, err)
	}
	namespaces, _, _ := unstructured.NestedStringSlice(spec, "namespaceSelector", "matchNames")
	if len(namespaces) == 0 {
		namespaces = []string{sm.GetNamespace()}
	}
	selector, _, err := unstructured.NestedMap(spec, "selector")
	if err != nil {
		return "", fmt.Errorf("%s: selector: %w", where, err)
	}
	if err := knownKeys(selector, "matchLabels"); err != nil {
		return "", fmt.Errorf("%s: selector: %w", where, err)
	}
	matchLabels, _, err := unstructured.NestedStringMap(selector, "matchLabels")
	if err != nil || len(matchLabels) == 0 {
		return "", fmt.Errorf("%s: a selector without matchLabels (%v) would select every Service", where, err)
	}
	endpoints, _, err := unstructured.NestedSlice(spec, "endpoints")
	if err != nil || len(endpoints) == 0 {
		return "", fmt.Errorf("%s: no endpoints (%v)", where, err)
	}

	var jobs []any
	for i, raw := range endpoints {
		ep, ok := raw.(map[string]any)
		if !ok {
			return "", fmt.Errorf("%s: endpoint %d is not an object", where, i)
		}
		if err := knownKeys(ep, "port", "scheme", "path", "interval", "scrapeTimeout", "bearerTokenFile", "tlsConfig"); err != nil {
			return "", fmt.Errorf("%s: endpoint %d: %w", where, i, err)
		}
		port, _ := ep["port"].(string)
		if port == "" {
			return "", fmt.Errorf("%s: endpoint %d names no port", where, i)
		}
		job := map[string]any{
			"job_name":     fmt.Sprintf("serviceMonitor/%s/%s/%d", sm.GetNamespace(), sm.GetName(), i),
			"scheme":       stringOr(ep["scheme"], "http"),
			"metrics_path": stringOr(ep["path"], "/metrics"),
		}
		targets, err := d.Targets(namespaces, matchLabels, port)
		if err != nil {
			return "", fmt.Errorf("%s: endpoint %d: %w", where, i, err)
		}
		if len(targets) == 0 {
			return "", fmt.Errorf("%s: endpoint %d: no ready address of a port %q of a Service labelled %v", where, i, port, matchLabels)
		}
		var static []any
		for _, tg := range targets {
			static = append(static, map[string]any{
				"targets": []string{tg.Address},
				"labels":  map[string]any{"namespace": tg.Namespace, "service": tg.Service, "pod": tg.Pod, "job": tg.Service, "endpoint": port},
			})
		}
		job["static_configs"] = static
		if v, ok := ep["interval"].(string); ok {
			job["scrape_interval"] = v
		}
		if v, ok := ep["scrapeTimeout"].(string); ok {
			job["scrape_timeout"] = v
		}
		if _, ok := ep["bearerTokenFile"]; ok {
			// Inside a Prometheus pod the file is its ServiceAccount
			// token; out here, the token the test requested for it.
			job["authorization"] = map[string]any{"credentials_file": d.TokenFile}
		}
		if raw, ok := ep["tlsConfig"]; ok {
			tls, err := tlsConfig(raw, sm.GetNamespace(), fmt.Sprintf("%s-%s-%d", sm.GetNamespace(), sm.GetName(), i), d)
			if err != nil {
				return "", fmt.Errorf("%s: endpoint %d: tlsConfig: %w", where, i, err)
			}
			job["tls_config"] = tls
		}
		jobs = append(jobs, job)
	}
	out, err := yaml.Marshal(jobs)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if line != "" {
			b.WriteString("  " + line)
		}
	}
	return b.String(), nil
}

// tlsConfig translates a ServiceMonitor endpoint's tlsConfig, writing a
// CA it names into d.Dir.
func tlsConfig(raw any, namespace, fileName string, d Discovery) (map[string]any, error) {
	tls, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not an object")
	}
	if err := knownKeys(tls, "serverName", "ca", "insecureSkipVerify"); err != nil {
		return nil, err
	}
	out := map[string]any{}
	if v, ok := tls["serverName"].(string); ok {
		out["server_name"] = v
	}
	if v, ok := tls["insecureSkipVerify"].(bool); ok {
		out["insecure_skip_verify"] = v
	}
	if ca, ok := tls["ca"].(map[string]any); ok {
		if err := knownKeys(ca, "secret"); err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		name, _, _ := unstructured.NestedString(ca, "secret", "name")
		key, _, _ := unstructured.NestedString(ca, "secret", "key")
		if name == "" || key == "" {
			return nil, fmt.Errorf("ca names no Secret key")
		}
		pem, err := d.Secret(namespace, name, key)
		if err != nil {
			return nil, fmt.Errorf("ca: Secret %s key %s: %w", name, key, err)
		}
		file := filepath.Join(d.Dir, fileName+"-ca.crt")
		if err := os.WriteFile(file, pem, 0o600); err != nil {
			return nil, err
		}
		out["ca_file"] = file
	}
	return out, nil
}

// knownKeys fails on a key of m outside known.
func knownKeys(m map[string]any, known ...string) error {
	for k := range m {
		if !slices.Contains(known, k) {
			return fmt.Errorf("field %q is not understood by this translation (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

func stringOr(v any, def string) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return def
}
