"""The version stamp of the Kubernetes commands built here.

KUBE_VERSION is the k8s.io/kubernetes release go.mod pins; keep them in step
(tests/cluster/cmd/kube-apiserver stamps the same).
"""

KUBE_VERSION = "v1.36.3"

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
