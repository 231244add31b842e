"""What an install of the Kubernetes path needs from the build.

The end-to-end install test (//tests/e2e/install) and the one-command local
cluster (//tools/localcluster) install the same artifacts; tests/install
(Go) reads them from these environment variables (artifacts.go).
"""

load("//tests/cluster:defs.bzl", "NODE_CLUSTER_PROGRAMS")

# Environment variable -> label. Each value is passed as $(rlocationpath).
# The cluster's own programs come with NODE_CLUSTER_PROGRAMS.
INSTALL_ARTIFACTS = NODE_CLUSTER_PROGRAMS | {
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
}

INSTALL_DATA = INSTALL_ARTIFACTS.values()

INSTALL_ENV = {env: "$(rlocationpath %s)" % label for env, label in INSTALL_ARTIFACTS.items()}
