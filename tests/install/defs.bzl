"""What an install of the Kubernetes path needs from the build.

The end-to-end install test (//tests/e2e/install) and the one-command local
cluster (//tools/localcluster) install the same artifacts; tests/install
(Go) reads them from these environment variables (artifacts.go).
"""

# Environment variable -> label. Each value is passed as $(rlocationpath).
INSTALL_ARTIFACTS = {
    "CHART_PACKAGE": "//charts/sandbox-operator:package",
    "HELM": "//tools/helm",
    "SANDBOX_APISERVER_IMAGE": "//images:sandbox-apiserver.host",
    "SANDBOX_ENVD_PROXY_IMAGE": "//images:sandbox-envd-proxy.host",
    "PAUSE_IMAGE": "//images:pause.host",
    "SANDBOXD_SIM": "//src/cmd/sandboxd-sim",
    "EXAMPLE_E2B_VALUES": "//examples:e2b-values.yaml",
    "EXAMPLE_TEMPLATE_WARMPOOL": "//examples:l3/template-warmpool.yaml",
    "EXAMPLE_SANDBOX": "//examples:l3/sandbox.yaml",
    "EXAMPLE_E2B_WARMPOOL": "//examples:e2b/base-warmpool.yaml",
    "EXAMPLE_CODE_INTERPRETER_WARMPOOL": "//examples:e2b/code-interpreter-warmpool.yaml",
    "SANDBOXTEMPLATES_CRD": "//tests/testdata/agentsandbox-crds:extensions.agents.x-k8s.io_sandboxtemplates.yaml",
    "SANDBOXWARMPOOLS_CRD": "//tests/testdata/agentsandbox-crds:extensions.agents.x-k8s.io_sandboxwarmpools.yaml",
    # The cluster's own programs (tests/cluster).
    "KUBE_APISERVER": "//tests/cluster/cmd/kube-apiserver",
    "KUBELET": "//tools/kube/kubelet",
    "KUBE_CONTROLLER_MANAGER": "//tools/kube/kube-controller-manager",
    "KUBE_SCHEDULER": "//tools/kube/kube-scheduler",
    "KUBE_PROXY": "//tools/kube/kube-proxy",
    "KUBECTL": "//tools/kube/kubectl",
}

INSTALL_DATA = INSTALL_ARTIFACTS.values()

INSTALL_ENV = {env: "$(rlocationpath %s)" % label for env, label in INSTALL_ARTIFACTS.items()}
