"""kube_binary: one upstream Kubernetes command, pure Go and version-stamped."""

load("@io_bazel_rules_go//go:def.bzl", "go_binary")

# The release go.mod pins for k8s.io/kubernetes; tests/cluster/cmd/kube-apiserver
# stamps the same.
KUBE_VERSION = "v1.36.3"

def kube_binary(name, visibility = ["//visibility:public"]):
    """Builds k8s.io/kubernetes/cmd/<name> as Kubernetes' release build does.

    Args:
      name: the command under k8s.io/kubernetes/cmd.
      visibility: the target's visibility.
    """
    major, minor = KUBE_VERSION.lstrip("v").split(".")[:2]
    stamp = {}
    for pkg in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]:
        stamp.update({
            pkg + ".gitVersion": KUBE_VERSION,
            pkg + ".gitMajor": major,
            pkg + ".gitMinor": minor,
            pkg + ".gitTreeState": "clean",
        })
    go_binary(
        name = name,
        embed = ["@io_k8s_kubernetes//cmd/%s:%s_lib" % (name, name)],
        # Static, like the release binaries: the node runs them outside the
        # build's root.
        pure = "on",
        visibility = visibility,
        x_defs = stamp,
    )
