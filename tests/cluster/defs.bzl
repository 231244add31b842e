"""What a test of a real node cluster (tests/cluster StartNodeCluster) needs.

The cluster's own programs, built from the Kubernetes module version in
go.mod; tests/cluster reads them from these environment variables
(kubebinaries.go). containerd and runc come from the build's root.
"""

# Environment variable -> label. Each value is passed as $(rlocationpath).
NODE_CLUSTER_PROGRAMS = {
    "KUBE_APISERVER": "//tests/cluster/cmd/kube-apiserver",
    "KUBELET": "//tools/kube/kubelet",
    "KUBE_CONTROLLER_MANAGER": "//tools/kube/kube-controller-manager",
    "KUBE_SCHEDULER": "//tools/kube/kube-scheduler",
    "KUBE_PROXY": "//tools/kube/kube-proxy",
    "KUBECTL": "//tools/kube/kubectl",
}

NODE_CLUSTER_DATA = NODE_CLUSTER_PROGRAMS.values()

NODE_CLUSTER_ENV = {env: "$(rlocationpath %s)" % label for env, label in NODE_CLUSTER_PROGRAMS.items()}
