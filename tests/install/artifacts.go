// Package install brings up the Kubernetes path of sandbox-operator on a
// real single-node cluster (tests/cluster's NodeCluster) the way the
// configuration reference installs it: the two upstream CRDs, simulated
// sandboxd nodes publishing NodeInventory, the Secrets the chart's values
// name, and helm install of the packaged chart with the helm the build
// makes, with the e2b surface on. The end-to-end test (tests/e2e/install)
// and the one-command local cluster (//tools/localcluster) both use it.
package install

import (
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// Artifacts are the build outputs an install uses. Under Bazel they come
// from the runfiles locations the BUILD file puts in the environment
// (FromEnv names the variables).
type Artifacts struct {
	Chart          string   // the packaged chart, sandbox-operator-<version>.tgz
	Helm           string   // helm, built from Helm's Go module
	APIServerImage string   // OCI layout tar of sandbox-apiserver for this platform
	ProxyImage     string   // OCI layout tar of sandbox-envd-proxy for this platform
	PauseImage     string   // OCI layout tar of the pods' pause image
	Sim            string   // the sandboxd-sim binary
	CRDs           []string // the upstream SandboxTemplate and SandboxWarmPool CRDs
	E2BValues      string   // examples/e2b-values.yaml
	// The examples a user applies after install: the L3 template and warm
	// pool, the Sandbox claiming from it, and the warm pool behind the e2b
	// SDK's "base" alias.
	TemplateWarmPool, Sandbox, E2BWarmPool string
	CodeInterpreterWarmPool                string
}

// artifactEnv maps each artifact to the variable holding its runfiles
// location.
var artifactEnv = []struct {
	env  string
	dest func(*Artifacts) *string
}{
	{"CHART_PACKAGE", func(a *Artifacts) *string { return &a.Chart }},
	{"HELM", func(a *Artifacts) *string { return &a.Helm }},
	{"SANDBOX_APISERVER_IMAGE", func(a *Artifacts) *string { return &a.APIServerImage }},
	{"SANDBOX_ENVD_PROXY_IMAGE", func(a *Artifacts) *string { return &a.ProxyImage }},
	{"PAUSE_IMAGE", func(a *Artifacts) *string { return &a.PauseImage }},
	{"SANDBOXD_SIM", func(a *Artifacts) *string { return &a.Sim }},
	{"EXAMPLE_E2B_VALUES", func(a *Artifacts) *string { return &a.E2BValues }},
	{"EXAMPLE_TEMPLATE_WARMPOOL", func(a *Artifacts) *string { return &a.TemplateWarmPool }},
	{"EXAMPLE_SANDBOX", func(a *Artifacts) *string { return &a.Sandbox }},
	{"EXAMPLE_E2B_WARMPOOL", func(a *Artifacts) *string { return &a.E2BWarmPool }},
	{"EXAMPLE_CODE_INTERPRETER_WARMPOOL", func(a *Artifacts) *string { return &a.CodeInterpreterWarmPool }},
}

// crdEnv hold the upstream CRDs' locations.
var crdEnv = []string{"SANDBOXTEMPLATES_CRD", "SANDBOXWARMPOOLS_CRD"}

// FromEnv resolves every artifact from its environment variable; missing
// names the first variable that is unset (the caller is not running under
// Bazel), err reports a location that does not resolve.
func FromEnv() (a Artifacts, missing string, err error) {
	for _, e := range artifactEnv {
		p, err := testbin.Runfile(e.env)
		if err != nil {
			return a, "", err
		}
		if p == "" {
			return a, e.env, nil
		}
		*e.dest(&a) = p
	}
	for _, env := range crdEnv {
		p, err := testbin.Runfile(env)
		if err != nil {
			return a, "", err
		}
		if p == "" {
			return a, env, nil
		}
		a.CRDs = append(a.CRDs, p)
	}
	return a, "", nil
}
