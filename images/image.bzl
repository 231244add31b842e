"""Multi-platform OCI images of the project's binaries, assembled by //tools/images.

go_oci_image cross-compiles one go_binary for every platform in
IMAGE_PLATFORMS (rules_go's cgo_off platforms, so every build is pure Go and
statically linked) and packs the builds into one OCI image index, written as
an OCI layout tar: <name>.tar. Next to it, <name>.host packs only the build
for the CPU of the target platform (this machine unless --platforms says
otherwise) into a single-platform index, <name>.host.tar, for tests that run
the images here and should not compile for the other architecture.

The version label comes from --define IMAGE_VERSION=<version> (default
"dev"); every timestamp is the Unix epoch, so the same sources give the same
digest on every machine.
"""

load("@io_bazel_rules_go//go:def.bzl", "go_cross_binary")

# OCI platform -> rules_go platform. The platforms without the _cgo suffix
# carry the cgo_off constraint: rules_go builds pure Go for them.
IMAGE_PLATFORMS = {
    "linux/amd64": "@io_bazel_rules_go//go/toolchain:linux_amd64",
    "linux/arm64": "@io_bazel_rules_go//go/toolchain:linux_arm64",
}

# OCI platform -> the condition that selects it for <name>.host. rules_go's
# go/platform:<goarch> settings are exactly the CPU constraints
# @platforms//cpu:x86_64 and @platforms//cpu:aarch64; this module has no
# bazel_dep on platforms, so it names them through rules_go.
HOST_CPU_SETTINGS = {
    "linux/amd64": "@io_bazel_rules_go//go/platform:amd64",
    "linux/arm64": "@io_bazel_rules_go//go/platform:arm64",
}

# The images //images:push publishes (to <prefix>/<name>:<tag>).
PUSHED_IMAGES = [
    "sandbox-apiserver",
    "sandbox-envd-proxy",
    "sandbox-e2b",
]

# The images built for tests and a local cluster only, never pushed: the
# simulator, and the pod sandbox image a container runtime starts first in
# every pod.
TEST_IMAGES = [
    "pause",
    "sandboxd-sim",
]

# The packaged chart //images:push sends next to the images, as an OCI
# artifact helm install oci://<prefix>/sandbox-operator reads.
CHART_PACKAGE = "//charts/sandbox-operator:package"
CHART_PACKAGE_ROOTPATH = "$(rootpath %s)" % CHART_PACKAGE

def push_args(images = PUSHED_IMAGES):
    """The arguments //images:push's script gets ahead of the caller's flags.

    The images tool, then one layout per image, as runfiles paths relative to
    the main repository's runfiles directory (where `bazel run` starts). Tests
    that run the push script the way `bazel run` does use the same list.

    Args:
      images: names of go_oci_image targets in //images.

    Returns:
      A list of $(rootpath) expressions.
    """
    return ["$(rootpath //tools/images)"] + ["$(rootpath //images:%s)" % image for image in images] + [CHART_PACKAGE_ROOTPATH]

def _oci_image_index_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".tar")
    args = ctx.actions.args()
    args.add("build")
    args.add("--name", ctx.attr.image_name)
    inputs = []
    for target, platform in ctx.attr.binaries.items():
        binary = target[DefaultInfo].files_to_run.executable
        inputs.append(binary)
        args.add("--binary", "%s=%s" % (platform, binary.path))
    args.add("--version", ctx.var.get("IMAGE_VERSION", ctx.attr.version))
    args.add("--source", ctx.attr.source)
    args.add("--out", out)
    ctx.actions.run(
        executable = ctx.executable._tool,
        arguments = [args],
        inputs = inputs,
        outputs = [out],
        mnemonic = "OciImageIndex",
        progress_message = "Assembling OCI image index %s" % ctx.attr.image_name,
    )
    return [DefaultInfo(files = depset([out]))]

oci_image_index = rule(
    implementation = _oci_image_index_impl,
    doc = "Packs per-platform static binaries into one OCI image index (an OCI layout tar).",
    attrs = {
        "binaries": attr.label_keyed_string_dict(
            doc = "Each platform's binary, keyed by target, valued by OCI platform (linux/amd64).",
            mandatory = True,
            allow_empty = False,
        ),
        "image_name": attr.string(
            doc = "Image name: the binary's name in the image, its entrypoint and title.",
            mandatory = True,
        ),
        "source": attr.string(
            doc = "org.opencontainers.image.source label.",
            default = "https://github.com/cocoonstack/sandbox-operator",
        ),
        "version": attr.string(
            doc = "org.opencontainers.image.version label unless --define IMAGE_VERSION is set.",
            default = "dev",
        ),
        "_tool": attr.label(
            default = "//tools/images",
            executable = True,
            cfg = "exec",
        ),
    },
)

def go_oci_image(name, binary, image_name = None, visibility = None, **kwargs):
    """Cross-compiles binary for IMAGE_PLATFORMS and packs it as <name>.tar.

    Also declares <name>.host, the same image for the target platform's CPU
    only (<name>.host.tar). It reuses that platform's cross build, so its one
    manifest is byte for byte the matching manifest of <name>, and building
    it compiles nothing for the other platforms.

    Args:
      name: target name; the outputs are <name>.tar and <name>.host.tar.
      binary: a go_binary label (e.g. //src/cmd/sandbox-apiserver).
      image_name: image name; defaults to name.
      visibility: visibility of the image targets.
      **kwargs: passed to oci_image_index (source, version, tags).
    """
    binaries = {}
    host_binaries = {}
    for oci_platform, bazel_platform in IMAGE_PLATFORMS.items():
        cross = "%s_%s" % (name, oci_platform.replace("/", "_"))
        go_cross_binary(
            name = cross,
            target = binary,
            platform = bazel_platform,
            tags = kwargs.get("tags", []),
            visibility = ["//visibility:private"],
        )
        binaries[":" + cross] = oci_platform
        host_binaries[HOST_CPU_SETTINGS[oci_platform]] = {":" + cross: oci_platform}
    oci_image_index(
        name = name,
        image_name = image_name or name,
        binaries = binaries,
        visibility = visibility,
        **kwargs
    )
    oci_image_index(
        name = name + ".host",
        image_name = image_name or name,
        binaries = select(
            host_binaries,
            no_match_error = "%s.host: the target platform's CPU is none of %s" % (name, ", ".join(IMAGE_PLATFORMS.keys())),
        ),
        visibility = visibility,
        **kwargs
    )
