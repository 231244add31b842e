package chart_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/namehold"
)

// defaultObjects is the default render, as `helm template --include-crds`
// lists it: 18 objects (kind/namespace/name).
var defaultObjects = []string{
	"APIService//v1beta1.agents.x-k8s.io",
	"Certificate/" + releaseNamespace + "/sandbox-apiserver-ca",
	"Certificate/" + releaseNamespace + "/sandbox-apiserver-serving",
	"ClusterRole//sandbox-apiserver",
	"ClusterRoleBinding//sandbox-apiserver",
	"ClusterRoleBinding//sandbox-apiserver:system:auth-delegator",
	"CustomResourceDefinition//nodeinventories.sandbox.cocoonstack.io",
	"Deployment/" + releaseNamespace + "/sandbox-apiserver",
	"Issuer/" + releaseNamespace + "/sandbox-apiserver-ca",
	"Issuer/" + releaseNamespace + "/sandbox-apiserver-selfsigned",
	"PodDisruptionBudget/" + releaseNamespace + "/sandbox-apiserver",
	"Role/" + releaseNamespace + "/sandbox-apiserver-leader-election",
	"Role/" + releaseNamespace + "/sandbox-apiserver-name-holds",
	"RoleBinding/" + releaseNamespace + "/sandbox-apiserver-leader-election",
	"RoleBinding/" + releaseNamespace + "/sandbox-apiserver-name-holds",
	"RoleBinding/kube-system/sandbox-apiserver-auth-reader",
	"Service/" + releaseNamespace + "/sandbox-apiserver",
	"ServiceAccount/" + releaseNamespace + "/sandbox-apiserver",
}

// e2bObjects are what apiserver.e2b.enabled=true adds: the e2b Service and
// the envd proxy.
var e2bObjects = []string{
	"ClusterRole//sandbox-envd-proxy",
	"ClusterRoleBinding//sandbox-envd-proxy",
	"Deployment/" + releaseNamespace + "/sandbox-envd-proxy",
	"Service/" + releaseNamespace + "/sandbox-apiserver-e2b",
	"Service/" + releaseNamespace + "/sandbox-envd-proxy",
	"ServiceAccount/" + releaseNamespace + "/sandbox-envd-proxy",
}

func sorted(parts ...[]string) []string {
	var all []string
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.Sort(all)
	return all
}

func assertObjects(t *testing.T, objs []object, want []string) {
	t.Helper()
	got := keys(objs)
	if !slices.Equal(got, want) {
		t.Fatalf("rendered %d objects, want %d:\n got: %s\nwant: %s",
			len(got), len(want), strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

func TestDefaultRenderIs18Objects(t *testing.T) {
	objs := mustRender(t)
	if len(defaultObjects) != 18 {
		t.Fatalf("the expected list itself has %d entries", len(defaultObjects))
	}
	assertObjects(t, objs, sorted(defaultObjects))
}

func TestE2BRenderIs24Objects(t *testing.T) {
	objs := mustRender(t, e2bSets...)
	want := sorted(defaultObjects, e2bObjects)
	if len(want) != 24 {
		t.Fatalf("the expected list itself has %d entries", len(want))
	}
	assertObjects(t, objs, want)
}

func TestE2BWithEnvdSecretValueIs25Objects(t *testing.T) {
	objs := mustRender(t, with(e2bSets,
		"apiserver.e2b.envdSecret.secretName=",
		"apiserver.e2b.envdSecret.value=s3cr3t-envd-key")...)
	want := sorted(defaultObjects, e2bObjects, []string{"Secret/" + releaseNamespace + "/sandbox-envd-secret"})
	if len(want) != 25 {
		t.Fatalf("the expected list itself has %d entries", len(want))
	}
	assertObjects(t, objs, want)

	secret := find(t, objs, "Secret", "sandbox-envd-secret")
	enc, _, _ := unstructured.NestedString(secret.Object, "data", "secret")
	if dec, err := base64.StdEncoding.DecodeString(enc); err != nil || string(dec) != "s3cr3t-envd-key" {
		t.Fatalf("rendered envd secret data.secret = %q (%v), want the value base64-encoded", enc, err)
	}
	// Both consumers mount the rendered Secret.
	for _, name := range []string{"sandbox-apiserver", "sandbox-envd-proxy"} {
		d := find(t, objs, "Deployment", name)
		if got := secretVolumes(t, d); !slices.Contains(got, "sandbox-envd-secret") {
			t.Errorf("Deployment %s mounts secrets %v, want sandbox-envd-secret among them", name, got)
		}
	}
}

func TestCertManagerDisabledNeedsCABundle(t *testing.T) {
	objs := mustRender(t, "certManager.enabled=false", "certManager.caBundle=Q0EK")
	if len(objs) != 14 {
		t.Fatalf("rendered %d objects without cert-manager, want 14: %v", len(objs), keys(objs))
	}
	for _, o := range objs {
		if strings.HasPrefix(o.u.GetAPIVersion(), "cert-manager.io/") {
			t.Errorf("cert-manager object %s rendered with certManager.enabled=false", o.key())
		}
	}
	api := find(t, objs, "APIService", "v1beta1.agents.x-k8s.io")
	if ca, _, _ := unstructured.NestedString(api.Object, "spec", "caBundle"); ca != "Q0EK" {
		t.Errorf("APIService caBundle = %q, want the value of certManager.caBundle", ca)
	}
	if _, ok := api.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
		t.Error("APIService asks cainjector for a CA although cert-manager is off")
	}
}

func TestRequiredValuesFailTheRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		msg  string
	}{
		{
			name: "e2b without api key secret",
			sets: with(e2bSets, "apiserver.e2b.apiKeySecret.name="),
			msg:  "apiserver.e2b.apiKeySecret.name is required when apiserver.e2b.enabled is true",
		},
		{
			name: "e2b without envd secret",
			sets: with(e2bSets, "apiserver.e2b.envdSecret.secretName="),
			msg:  "apiserver.e2b.envdSecret.value or apiserver.e2b.envdSecret.secretName is required when apiserver.e2b.enabled is true",
		},
		{
			name: "e2b without domain",
			sets: with(e2bSets, "apiserver.e2b.domain="),
			msg:  "apiserver.e2b.domain is required when apiserver.e2b.enabled is true",
		},
		{
			name: "e2b alone",
			sets: []string{"apiserver.e2b.enabled=true"},
			msg:  "apiserver.e2b.apiKeySecret.name is required when apiserver.e2b.enabled is true",
		},
		{
			name: "cert-manager off without CA bundle",
			sets: []string{"certManager.enabled=false"},
			msg:  "certManager.caBundle is required when certManager.enabled is false",
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

// scenarios are the value sets every structural test runs over.
var scenarios = map[string][]string{
	"default":            nil,
	"e2b":                e2bSets,
	"e2b-envd-value":     with(e2bSets, "apiserver.e2b.envdSecret.secretName=", "apiserver.e2b.envdSecret.value=k"),
	"e2b-full":           with(e2bSets, "apiserver.e2b.envdVersion=0.8.1", "apiserver.e2b.defaultTimeoutSeconds=600", "apiserver.e2b.createLimits.rate=2.5", "apiserver.e2b.createLimits.burst=10", "apiserver.e2b.createLimits.maxSandboxes=0", "apiserver.e2b.createLimits.maxSnapshots=7", "apiserver.e2b.createLimits.maxSnapshotBytes=1073741824", "apiserver.e2b.templateAliases[0]=base img:1 small", "envdProxy.tlsSecretName=wildcard-tls", "envdProxy.namespace=team-a"),
	"no-cert-manager":    {"certManager.enabled=false", "certManager.caBundle=Q0EK"},
	"no-token-no-driver": {"apiserver.warmPoolDriver=false", "apiserver.sandboxdToken.secretName="},
	"e2b-builds-dir":     buildsDirSets,
	"e2b-builds-s3":      buildsS3Sets,
	"monitoring":         monitoringSets,
}

// TestObjectsDecodeStrictly decodes every object of a kind the Kubernetes
// schemes know into its Go type with unknown and duplicate fields rejected,
// so a misspelt or misplaced field fails here rather than at install.
func TestObjectsDecodeStrictly(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, apiregistrationv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	for name, sets := range scenarios {
		t.Run(name, func(t *testing.T) {
			for _, o := range mustRender(t, sets...) {
				_, _, err := decoder.Decode([]byte(o.raw), nil, nil)
				switch {
				case err == nil:
				case runtime.IsNotRegisteredError(err) && o.u.GetAPIVersion() == "cert-manager.io/v1":
					// cert-manager's types are not vendored; parsed above.
				case runtime.IsNotRegisteredError(err) && o.u.GetAPIVersion() == "monitoring.coreos.com/v1":
					// Nor are prometheus-operator's; tests/integration/monitoring
					// checks them against its CRDs.
				default:
					t.Errorf("%s (%s): %v", o.key(), o.source, err)
				}
				if ns := o.u.GetNamespace(); ns != "" && ns != releaseNamespace &&
					!(ns == "kube-system" && o.u.GetName() == "sandbox-apiserver-auth-reader") {
					t.Errorf("%s is in namespace %q, want the release namespace", o.key(), ns)
				}
			}
		})
	}
}

// TestChartCRDIsTheGeneratedOne: Helm installs, byte for byte, the CRD that
// tools/codegen.sh generates from the Go types, and nothing else from crds/.
func TestChartCRDIsTheGeneratedOne(t *testing.T) {
	c := loadChart(t)
	got := c.CRDObjects()
	if len(got) != 1 {
		t.Fatalf("chart has %d CRDs, want 1 (it ships no upstream CRD)", len(got))
	}
	if got[0].File.Name != sandboxchart.NodeInventoryCRDPath || !bytes.Equal(got[0].File.Data, crds.NodeInventoryYAML) {
		t.Fatalf("chart CRD %s differs from the generated %s", got[0].File.Name, sandboxchart.NodeInventoryCRDPath)
	}
	crd := find(t, mustRender(t), "CustomResourceDefinition", "nodeinventories.sandbox.cocoonstack.io")
	if g, _, _ := unstructured.NestedString(crd.Object, "spec", "group"); g != "sandbox.cocoonstack.io" {
		t.Fatalf("CRD group %q", g)
	}
}

func TestImageTagsDefaultToLatest(t *testing.T) {
	objs := mustRender(t, e2bSets...)
	for name, want := range map[string]string{
		"sandbox-apiserver":  "ghcr.io/cocoonstack/sandbox-apiserver:latest",
		"sandbox-envd-proxy": "ghcr.io/cocoonstack/sandbox-envd-proxy:latest",
	} {
		if got := container(t, find(t, objs, "Deployment", name))["image"]; got != want {
			t.Errorf("%s image = %v, want %s", name, got, want)
		}
	}
	objs = mustRender(t, with(e2bSets, "apiserver.image.tag=v1.2.3", "envdProxy.image.tag=v1.2.4")...)
	if got := container(t, find(t, objs, "Deployment", "sandbox-envd-proxy"))["image"]; got != "ghcr.io/cocoonstack/sandbox-envd-proxy:v1.2.4" {
		t.Errorf("pinned proxy image = %v", got)
	}
}

// TestPodsRunLocked: both Deployments run as the images' non-root user on a
// read-only root filesystem, probe /healthz, and pass the pod namespace down
// (the warm-pool driver's lease namespace).
func TestPodsRunLocked(t *testing.T) {
	objs := mustRender(t, e2bSets...)
	for name, scheme := range map[string]string{"sandbox-apiserver": "HTTPS", "sandbox-envd-proxy": "HTTP"} {
		t.Run(name, func(t *testing.T) {
			d := find(t, objs, "Deployment", name)
			pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
			if v, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !v {
				t.Error("pod securityContext.runAsNonRoot is not true")
			}
			if v, _, _ := unstructured.NestedFieldNoCopy(pod, "securityContext", "runAsUser"); v != float64(65532) {
				t.Errorf("pod runAsUser = %v, want 65532 (the images' user)", v)
			}
			c := container(t, d)
			if v, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem"); !v {
				t.Error("readOnlyRootFilesystem is not true")
			}
			if v, found, _ := unstructured.NestedBool(c, "securityContext", "allowPrivilegeEscalation"); !found || v {
				t.Error("allowPrivilegeEscalation is not false")
			}
			path, _, _ := unstructured.NestedString(c, "livenessProbe", "httpGet", "path")
			got, _, _ := unstructured.NestedString(c, "livenessProbe", "httpGet", "scheme")
			if path != "/healthz" || got != scheme {
				t.Errorf("liveness probe %s %s, want %s /healthz", got, path, scheme)
			}
			if _, ok := c["readinessProbe"]; !ok {
				t.Error("no readiness probe")
			}
			env, _, _ := unstructured.NestedSlice(c, "env")
			found := false
			for _, e := range env {
				m := e.(map[string]any)
				fp, _, _ := unstructured.NestedString(m, "valueFrom", "fieldRef", "fieldPath")
				found = found || (m["name"] == "POD_NAMESPACE" && fp == "metadata.namespace")
			}
			if !found {
				t.Error("POD_NAMESPACE does not come from metadata.namespace")
			}
		})
	}
	// With its TLS secret the proxy serves, and is probed over, HTTPS.
	objs = mustRender(t, with(e2bSets, "envdProxy.tlsSecretName=wildcard")...)
	c := container(t, find(t, objs, "Deployment", "sandbox-envd-proxy"))
	if got, _, _ := unstructured.NestedString(c, "livenessProbe", "httpGet", "scheme"); got != "HTTPS" {
		t.Errorf("proxy with TLS probed over %s", got)
	}
}

func TestRBAC(t *testing.T) {
	objs := mustRender(t, e2bSets...)
	role := find(t, objs, "ClusterRole", "sandbox-apiserver")
	for _, want := range []struct{ group, resource, verb string }{
		{"sandbox.cocoonstack.io", "nodeinventories", "watch"},
		{"extensions.agents.x-k8s.io", "sandboxwarmpools", "list"},
		{"extensions.agents.x-k8s.io", "sandboxtemplates", "watch"},
		{"extensions.agents.x-k8s.io", "sandboxwarmpools/status", "patch"},
		{"events.k8s.io", "events", "create"},
	} {
		if !grants(role, want.group, want.resource, want.verb) {
			t.Errorf("ClusterRole sandbox-apiserver does not grant %s on %s.%s", want.verb, want.resource, want.group)
		}
	}
	if grants(role, "sandbox.cocoonstack.io", "nodeinventories", "update") {
		t.Error("the apiserver may write NodeInventory; it only reads it")
	}
	proxy := find(t, objs, "ClusterRole", "sandbox-envd-proxy")
	rules, _, _ := unstructured.NestedSlice(proxy.Object, "rules")
	if len(rules) != 1 || !grants(proxy, "sandbox.cocoonstack.io", "nodeinventories", "list") {
		t.Errorf("proxy ClusterRole rules = %v, want only get/list/watch on nodeinventories", rules)
	}
	if !grants(find(t, objs, "Role", "sandbox-apiserver-leader-election"), "coordination.k8s.io", "leases", "update") {
		t.Error("leader-election Role does not grant update on leases")
	}

	holds := find(t, objs, "Role", "sandbox-apiserver-name-holds")
	if !grants(holds, "", "configmaps", "create") || !grants(holds, "", "configmaps", "update") {
		t.Error("name-holds Role does not grant create and update on configmaps")
	}
	if got, want := holdNames(holds), nameHoldObjects(); !slices.Equal(got, want) {
		t.Errorf("name-holds Role limits get and update to %v, the code writes %v", got, want)
	}
	// --peer-service: the replicas find each other from their Service's
	// EndpointSlices.
	if !grants(holds, "discovery.k8s.io", "endpointslices", "list") || !grants(holds, "discovery.k8s.io", "endpointslices", "watch") {
		t.Error("the apiserver's namespace Role does not grant list and watch on endpointslices, which --peer-service reads")
	}

	for name, ref := range map[string]string{
		"sandbox-apiserver-name-holds":            "sandbox-apiserver-name-holds",
		"sandbox-apiserver-auth-reader":           "extension-apiserver-authentication-reader",
		"sandbox-apiserver:system:auth-delegator": "system:auth-delegator",
		"sandbox-apiserver-leader-election":       "sandbox-apiserver-leader-election",
		"sandbox-apiserver":                       "sandbox-apiserver",
		"sandbox-envd-proxy":                      "sandbox-envd-proxy",
	} {
		var b *unstructured.Unstructured
		for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
			if has(objs, kind, name) {
				b = find(t, objs, kind, name)
			}
		}
		if b == nil {
			t.Errorf("no binding %s", name)
			continue
		}
		if got, _, _ := unstructured.NestedString(b.Object, "roleRef", "name"); got != ref {
			t.Errorf("binding %s refers to %s, want %s", name, got, ref)
		}
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		for _, s := range subjects {
			if ns := s.(map[string]any)["namespace"]; ns != releaseNamespace {
				t.Errorf("binding %s names a subject in %v, want %s", name, ns, releaseNamespace)
			}
		}
	}
}

func TestAPIServiceShadowsTheSandboxCRD(t *testing.T) {
	objs := mustRender(t)
	api := find(t, objs, "APIService", "v1beta1.agents.x-k8s.io")
	spec, _, _ := unstructured.NestedMap(api.Object, "spec")
	svc, _, _ := unstructured.NestedMap(spec, "service")
	if spec["group"] != "agents.x-k8s.io" || spec["version"] != "v1beta1" ||
		svc["name"] != "sandbox-apiserver" || svc["namespace"] != releaseNamespace {
		t.Fatalf("APIService spec = %v", spec)
	}
	if got := api.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != releaseNamespace+"/sandbox-apiserver-serving" {
		t.Errorf("inject-ca-from = %q, want the serving Certificate", got)
	}
	cert := find(t, objs, "Certificate", "sandbox-apiserver-serving")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !slices.Contains(dns, "sandbox-apiserver."+releaseNamespace+".svc") {
		t.Errorf("serving certificate names %v, want the Service's DNS name", dns)
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	if got := secretVolumes(t, find(t, objs, "Deployment", "sandbox-apiserver")); !slices.Contains(got, secret) {
		t.Errorf("apiserver mounts %v, not the serving certificate's Secret %s", got, secret)
	}
}

func container(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s has %d containers, want 1", d.GetName(), len(cs))
	}
	return cs[0].(map[string]any)
}

func secretVolumes(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	var names []string
	for _, v := range vols {
		if n, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); ok {
			names = append(names, n)
		}
	}
	return names
}

// holdNames are the resourceNames the name-holds Role's update rule
// allows.
func holdNames(role *unstructured.Unstructured) []string {
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for _, r := range rules {
		m := r.(map[string]any)
		verbs, _, _ := unstructured.NestedStringSlice(m, "verbs")
		if slices.Contains(verbs, "update") {
			names, _, _ := unstructured.NestedStringSlice(m, "resourceNames")
			return names
		}
	}
	return nil
}

// nameHoldObjects are the ConfigMaps namehold writes.
func nameHoldObjects() []string {
	var names []string
	for i := range namehold.Shards {
		names = append(names, namehold.ObjectName(i))
	}
	return names
}

func grants(role *unstructured.Unstructured, group, resource, verb string) bool {
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for _, r := range rules {
		m := r.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(m, "apiGroups")
		resources, _, _ := unstructured.NestedStringSlice(m, "resources")
		verbs, _, _ := unstructured.NestedStringSlice(m, "verbs")
		if slices.Contains(groups, group) && slices.Contains(resources, resource) && slices.Contains(verbs, verb) {
			return true
		}
	}
	return false
}

// The template build API (apiserver.e2b.builds) with each of its stores.
var (
	buildsDirSets = with(e2bSets,
		"apiserver.e2b.builds.enabled=true",
		"apiserver.e2b.builds.dir.existingClaim=e2b-build-files")
	buildsS3Sets = with(e2bSets,
		"apiserver.e2b.builds.enabled=true",
		"apiserver.e2b.builds.s3.bucket=template-files",
		"apiserver.e2b.builds.s3.prefix=prod",
		"apiserver.e2b.builds.s3.endpoint=https://minio.example.com",
		"apiserver.e2b.builds.s3.region=eu-west-1",
		"apiserver.e2b.builds.s3.forcePathStyle=true",
		"apiserver.e2b.builds.s3.credentialsSecret=build-store-aws")
)

// defaultBuildDir is the chart's default apiserver.e2b.builds.dir.mountPath.
const defaultBuildDir = "/var/lib/sandbox-apiserver/e2b-builds"

// apiserverArgs is the apiserver container's command line.
func apiserverArgs(t *testing.T, objs []object) []string {
	t.Helper()
	args, _, _ := unstructured.NestedStringSlice(container(t, find(t, objs, "Deployment", "sandbox-apiserver")), "args")
	return args
}

// buildArgs are the args of the template build API, in rendered order.
func buildArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "--e2b-build") {
			out = append(out, a)
		}
	}
	return out
}

func assertArgs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got: %s\nwant: %s", what, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

// affinity returns a Service's sessionAffinity and, when set, its ClientIP
// timeout (-1 when the Service carries no sessionAffinityConfig).
func affinity(svc *unstructured.Unstructured) (string, int64) {
	kind, _, _ := unstructured.NestedString(svc.Object, "spec", "sessionAffinity")
	timeout, found, _ := unstructured.NestedFieldNoCopy(svc.Object, "spec", "sessionAffinityConfig", "clientIP", "timeoutSeconds")
	if !found {
		return kind, -1
	}
	switch v := timeout.(type) {
	case float64:
		return kind, int64(v)
	case int64:
		return kind, v
	}
	return kind, -2
}

func podVolumes(d *unstructured.Unstructured) []map[string]any {
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	out := make([]map[string]any, 0, len(vols))
	for _, v := range vols {
		out = append(out, v.(map[string]any))
	}
	return out
}

// claimVolumes maps the name of each PersistentVolumeClaim volume to its claim.
func claimVolumes(d *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, v := range podVolumes(d) {
		if claim, ok, _ := unstructured.NestedString(v, "persistentVolumeClaim", "claimName"); ok {
			out[v["name"].(string)] = claim
		}
	}
	return out
}

func volumeNames(d *unstructured.Unstructured) []string {
	var names []string
	for _, v := range podVolumes(d) {
		names = append(names, v["name"].(string))
	}
	slices.Sort(names)
	return names
}

// envVar returns the env entry called name of a Deployment's container, or nil.
func envVar(t *testing.T, d *unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	env, _, _ := unstructured.NestedSlice(container(t, d), "env")
	for _, e := range env {
		if m := e.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

var awsEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// assertAggregatedServiceUnpinned: the APIService's Service never carries a
// session affinity, whatever the e2b surface needs.
func assertAggregatedServiceUnpinned(t *testing.T, objs []object) {
	t.Helper()
	svc := find(t, objs, "Service", "sandbox-apiserver")
	spec, _, _ := unstructured.NestedMap(svc.Object, "spec")
	for _, field := range []string{"sessionAffinity", "sessionAffinityConfig"} {
		if v, ok := spec[field]; ok {
			t.Errorf("Service sandbox-apiserver (the aggregated API) sets %s = %v", field, v)
		}
	}
}

func TestBuildsWithDirStore(t *testing.T) {
	objs := mustRender(t, buildsDirSets...)
	assertObjects(t, objs, sorted(defaultObjects, e2bObjects))

	// Every build flag is passed, the defaults included, and no S3 one.
	args := apiserverArgs(t, objs)
	assertArgs(t, "build args", buildArgs(args), []string{
		"--e2b-builds=true",
		"--e2b-build-parallel=2",
		"--e2b-build-timeout=30m",
		"--e2b-build-log-lines=10000",
		"--e2b-build-upload-max-files=1000",
		"--e2b-build-upload-max-total=10737418240",
		"--e2b-build-dir=" + defaultBuildDir,
		"--e2b-build-upload-max=1073741824",
	})
	if !slices.Contains(args, "--enable-e2b-api=true") {
		t.Errorf("builds on without --enable-e2b-api=true: %q", args)
	}

	// The claim is mounted, writable, where --e2b-build-dir points.
	d := find(t, objs, "Deployment", "sandbox-apiserver")
	claims := claimVolumes(d)
	if len(claims) != 1 || claims["e2b-builds"] != "e2b-build-files" {
		t.Fatalf("claim volumes %v, want e2b-builds -> e2b-build-files", claims)
	}
	mounts, _, _ := unstructured.NestedSlice(container(t, d), "volumeMounts")
	var mount map[string]any
	for _, m := range mounts {
		if m.(map[string]any)["name"] == "e2b-builds" {
			mount = m.(map[string]any)
		}
	}
	if mount == nil || mount["mountPath"] != defaultBuildDir {
		t.Fatalf("the build store is mounted as %v, want at %s", mount, defaultBuildDir)
	}
	if ro, _ := mount["readOnly"].(bool); ro {
		t.Error("the build store is mounted read-only; uploads write to it")
	}
	for _, name := range awsEnv {
		if e := envVar(t, d, name); e != nil {
			t.Errorf("the dir store sets %s: %v", name, e)
		}
	}

	// The e2b Service pins clients; the aggregated API's does not.
	if kind, timeout := affinity(find(t, objs, "Service", "sandbox-apiserver-e2b")); kind != "ClientIP" || timeout != 10800 {
		t.Errorf("sandbox-apiserver-e2b affinity %q timeout %d, want ClientIP 10800", kind, timeout)
	}
	assertAggregatedServiceUnpinned(t, objs)

	// Every value reaches its flag.
	objs = mustRender(t, with(buildsDirSets,
		"apiserver.e2b.builds.parallel=4",
		"apiserver.e2b.builds.timeout=1h30m",
		"apiserver.e2b.builds.logLines=500",
		"apiserver.e2b.builds.uploadMax=5368709120",
		"apiserver.e2b.builds.uploadMaxFiles=20",
		"apiserver.e2b.builds.uploadMaxTotal=0",
		"apiserver.e2b.builds.dir.mountPath=/data/builds",
		"apiserver.e2b.builds.affinityTimeoutSeconds=7200")...)
	assertArgs(t, "build args with every value set", buildArgs(apiserverArgs(t, objs)), []string{
		"--e2b-builds=true",
		"--e2b-build-parallel=4",
		"--e2b-build-timeout=1h30m",
		"--e2b-build-log-lines=500",
		"--e2b-build-upload-max-files=20",
		"--e2b-build-upload-max-total=0",
		"--e2b-build-dir=/data/builds",
		"--e2b-build-upload-max=5368709120",
	})
	mounts, _, _ = unstructured.NestedSlice(container(t, find(t, objs, "Deployment", "sandbox-apiserver")), "volumeMounts")
	if !slices.ContainsFunc(mounts, func(m any) bool {
		return m.(map[string]any)["name"] == "e2b-builds" && m.(map[string]any)["mountPath"] == "/data/builds"
	}) {
		t.Errorf("the build store is not mounted at /data/builds: %v", mounts)
	}
	if kind, timeout := affinity(find(t, objs, "Service", "sandbox-apiserver-e2b")); kind != "ClientIP" || timeout != 7200 {
		t.Errorf("sandbox-apiserver-e2b affinity %q timeout %d, want ClientIP 7200", kind, timeout)
	}
}

func TestBuildsWithS3Store(t *testing.T) {
	objs := mustRender(t, buildsS3Sets...)
	assertObjects(t, objs, sorted(defaultObjects, e2bObjects))

	// The S3 flags, and neither --e2b-build-dir nor the upload bound of the
	// dir store's own PUT.
	assertArgs(t, "build args", buildArgs(apiserverArgs(t, objs)), []string{
		"--e2b-builds=true",
		"--e2b-build-parallel=2",
		"--e2b-build-timeout=30m",
		"--e2b-build-log-lines=10000",
		"--e2b-build-upload-max-files=1000",
		"--e2b-build-upload-max-total=10737418240",
		"--e2b-build-store-s3-bucket=template-files",
		"--e2b-build-store-s3-prefix=prod",
		"--e2b-build-store-s3-endpoint=https://minio.example.com",
		"--e2b-build-store-s3-region=eu-west-1",
		"--e2b-build-store-s3-force-path-style=true",
	})

	// The credentials Secret's keys become the AWS chain's variables.
	d := find(t, objs, "Deployment", "sandbox-apiserver")
	for _, name := range awsEnv {
		e := envVar(t, d, name)
		ref, _, _ := unstructured.NestedMap(e, "valueFrom", "secretKeyRef")
		if ref["name"] != "build-store-aws" || ref["key"] != name {
			t.Errorf("env %s = %v, want the key %s of the Secret build-store-aws", name, e, name)
		}
		optional, _ := ref["optional"].(bool)
		if want := name == "AWS_SESSION_TOKEN"; optional != want {
			t.Errorf("env %s optional = %v, want %v", name, optional, want)
		}
	}

	// No volume: the pod is the plain e2b one.
	if claims := claimVolumes(d); len(claims) != 0 {
		t.Errorf("the S3 store mounts claims %v", claims)
	}
	plain := find(t, mustRender(t, e2bSets...), "Deployment", "sandbox-apiserver")
	if got, want := volumeNames(d), volumeNames(plain); !slices.Equal(got, want) {
		t.Errorf("S3 store volumes %v, want the e2b render's %v", got, want)
	}

	if kind, timeout := affinity(find(t, objs, "Service", "sandbox-apiserver-e2b")); kind != "ClientIP" || timeout != 10800 {
		t.Errorf("sandbox-apiserver-e2b affinity %q timeout %d, want ClientIP 10800", kind, timeout)
	}
	assertAggregatedServiceUnpinned(t, objs)

	// With only a bucket: only the bucket flag, and the pod's own identity.
	objs = mustRender(t, with(e2bSets, "apiserver.e2b.builds.enabled=true", "apiserver.e2b.builds.s3.bucket=template-files")...)
	assertArgs(t, "build args with only a bucket", buildArgs(apiserverArgs(t, objs)), []string{
		"--e2b-builds=true",
		"--e2b-build-parallel=2",
		"--e2b-build-timeout=30m",
		"--e2b-build-log-lines=10000",
		"--e2b-build-upload-max-files=1000",
		"--e2b-build-upload-max-total=10737418240",
		"--e2b-build-store-s3-bucket=template-files",
	})
	d = find(t, objs, "Deployment", "sandbox-apiserver")
	for _, name := range awsEnv {
		if e := envVar(t, d, name); e != nil {
			t.Errorf("no credentialsSecret, yet %s is set: %v", name, e)
		}
	}
}

// TestBuildsAddNoObject: builds change the apiserver's pod and the e2b
// Service, never the object list.
func TestBuildsAddNoObject(t *testing.T) {
	for name, sets := range map[string][]string{"dir": buildsDirSets, "s3": buildsS3Sets} {
		t.Run(name, func(t *testing.T) {
			assertObjects(t, mustRender(t, sets...), sorted(defaultObjects, e2bObjects))
			objs := mustRender(t, with(sets, "apiserver.e2b.envdSecret.secretName=", "apiserver.e2b.envdSecret.value=k")...)
			assertObjects(t, objs, sorted(defaultObjects, e2bObjects, []string{"Secret/" + releaseNamespace + "/sandbox-envd-secret"}))
		})
	}
}

// TestBuildsDisabled: by default, and with store values but enabled false,
// no build flag, volume, credential or affinity is rendered.
func TestBuildsDisabled(t *testing.T) {
	for name, sets := range map[string][]string{
		"default": nil,
		"e2b":     e2bSets,
		"e2b with unused store values": with(e2bSets,
			"apiserver.e2b.builds.dir.existingClaim=e2b-build-files",
			"apiserver.e2b.builds.s3.bucket=template-files",
			"apiserver.e2b.builds.s3.credentialsSecret=build-store-aws"),
		"e2b off, unused store values": {"apiserver.e2b.builds.s3.bucket=template-files"},
	} {
		t.Run(name, func(t *testing.T) {
			objs := mustRender(t, sets...)
			if got := buildArgs(apiserverArgs(t, objs)); len(got) != 0 {
				t.Errorf("builds off, yet the apiserver gets %q", got)
			}
			d := find(t, objs, "Deployment", "sandbox-apiserver")
			if claims := claimVolumes(d); len(claims) != 0 {
				t.Errorf("builds off, yet the apiserver mounts claims %v", claims)
			}
			for _, v := range awsEnv {
				if e := envVar(t, d, v); e != nil {
					t.Errorf("builds off, yet %s is set: %v", v, e)
				}
			}
			if has(objs, "Service", "sandbox-apiserver-e2b") {
				if kind, timeout := affinity(find(t, objs, "Service", "sandbox-apiserver-e2b")); kind != "" || timeout != -1 {
					t.Errorf("builds off, yet sandbox-apiserver-e2b has affinity %q timeout %d", kind, timeout)
				}
			}
			assertAggregatedServiceUnpinned(t, objs)
		})
	}
}

// TestAggregatedServiceNeverPinned runs over every scenario.
func TestAggregatedServiceNeverPinned(t *testing.T) {
	for name, sets := range scenarios {
		t.Run(name, func(t *testing.T) {
			assertAggregatedServiceUnpinned(t, mustRender(t, sets...))
		})
	}
}

func TestBuildsRefusals(t *testing.T) {
	const (
		on    = "apiserver.e2b.builds.enabled=true"
		claim = "apiserver.e2b.builds.dir.existingClaim=e2b-build-files"
	)
	for _, tc := range []struct {
		name string
		sets []string
		msg  string
	}{
		{
			name: "builds without e2b",
			sets: []string{on, claim},
			msg:  "apiserver.e2b.builds.enabled requires apiserver.e2b.enabled: the template build API is part of the e2b surface",
		},
		{
			name: "no store",
			sets: with(e2bSets, on),
			msg:  "apiserver.e2b.builds.dir.existingClaim or apiserver.e2b.builds.s3.bucket is required when apiserver.e2b.builds.enabled is true",
		},
		{
			name: "S3 options without a bucket",
			sets: with(e2bSets, on, "apiserver.e2b.builds.s3.region=eu-west-1", "apiserver.e2b.builds.s3.credentialsSecret=aws"),
			msg:  "apiserver.e2b.builds.dir.existingClaim or apiserver.e2b.builds.s3.bucket is required when apiserver.e2b.builds.enabled is true",
		},
		{
			name: "both stores",
			sets: with(e2bSets, on, claim, "apiserver.e2b.builds.s3.bucket=template-files"),
			msg:  "apiserver.e2b.builds.dir.existingClaim and apiserver.e2b.builds.s3.bucket name two build stores: set only one",
		},
		{
			name: "relative mount path",
			sets: with(e2bSets, on, claim, "apiserver.e2b.builds.dir.mountPath=builds"),
			msg:  "apiserver.e2b.builds.dir.mountPath must be an absolute path when apiserver.e2b.builds.dir.existingClaim is set",
		},
		{
			name: "no parallelism",
			sets: with(e2bSets, on, claim, "apiserver.e2b.builds.parallel=0"),
			msg:  "apiserver.e2b.builds.parallel must be at least 1",
		},
		{
			name: "no timeout",
			sets: with(e2bSets, on, claim, "apiserver.e2b.builds.timeout="),
			msg:  "apiserver.e2b.builds.timeout is required when apiserver.e2b.builds.enabled is true",
		},
		{
			name: "no log lines",
			sets: with(e2bSets, on, claim, "apiserver.e2b.builds.logLines=0"),
			msg:  "apiserver.e2b.builds.logLines must be at least 1",
		},
		{
			name: "no upload size",
			sets: with(e2bSets, on, claim, "apiserver.e2b.builds.uploadMax=0"),
			msg:  "apiserver.e2b.builds.uploadMax must be at least 1",
		},
		{
			name: "affinity timeout 0",
			sets: with(e2bSets, on, claim, "apiserver.e2b.builds.affinityTimeoutSeconds=0"),
			msg:  "apiserver.e2b.builds.affinityTimeoutSeconds must be between 1 and 86400",
		},
		{
			name: "affinity timeout above a day",
			sets: with(e2bSets, on, claim, "apiserver.e2b.builds.affinityTimeoutSeconds=86401"),
			msg:  "apiserver.e2b.builds.affinityTimeoutSeconds must be between 1 and 86400",
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

// TestRolloutsKeepEveryReplica: a rollout adds a pod before it removes
// one, and each pod's grace period holds its shutdown delay with room for
// the requests in flight, so an upgrade never leaves a call with no
// replica or cuts one that was answered in time.
func TestRolloutsKeepEveryReplica(t *testing.T) {
	objs := mustRender(t, e2bSets...)
	for _, name := range []string{"sandbox-apiserver", "sandbox-envd-proxy"} {
		t.Run(name, func(t *testing.T) {
			d := find(t, objs, "Deployment", name)
			unavailable, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "strategy", "rollingUpdate", "maxUnavailable")
			surge, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "strategy", "rollingUpdate", "maxSurge")
			if fmt.Sprint(unavailable) != "0" || fmt.Sprint(surge) != "1" {
				t.Errorf("rollingUpdate maxUnavailable %v, maxSurge %v; want 0 and 1", unavailable, surge)
			}
			graceValue, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
			grace, _ := strconv.Atoi(fmt.Sprint(graceValue))
			var delay time.Duration
			args, _, _ := unstructured.NestedStringSlice(container(t, d), "args")
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--shutdown-delay="); ok {
					var err error
					if delay, err = time.ParseDuration(v); err != nil {
						t.Fatal(err)
					}
				}
			}
			if delay <= 0 {
				t.Fatalf("no positive --shutdown-delay in %v", args)
			}
			if time.Duration(grace)*time.Second < delay+30*time.Second {
				t.Errorf("terminationGracePeriodSeconds %d leaves under 30s for draining after a %v delay", grace, delay)
			}
		})
	}
}
