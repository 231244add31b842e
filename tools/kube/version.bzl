"""The version stamp of the Kubernetes commands built here.

KUBE_VERSION is the k8s.io/kubernetes release go.mod pins, read from go.mod
(//tools/build:go_mod.bzl); tests/cluster/cmd/kube-apiserver stamps the same.
"""

load("@go_mod_versions//:versions.bzl", "MODULES")

KUBE_VERSION = MODULES["k8s.io/kubernetes"]

def _stamp():
    major, minor = KUBE_VERSION.lstrip("v").split(".")[:2]
    out = {}
    for pkg in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]:
        out.update({
            pkg + ".gitVersion": KUBE_VERSION,
            pkg + ".gitMajor": major,
            pkg + ".gitMinor": minor,
            pkg + ".gitTreeState": "clean",
        })
    return out

# x_defs for a go_binary, as Kubernetes' release build stamps it.
KUBE_X_DEFS = _stamp()
