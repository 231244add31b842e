"""helm_chart_package: a Helm chart as a byte-reproducible .tgz, run by //tools/chartpkg.

The chart is stamped with the images' version, --define IMAGE_VERSION=<v>
(default "dev", as in images/image.bzl): appVersion and every image tag in
values.yaml become <v>, and Chart.yaml's version becomes its SemVer 2 form:

    IMAGE_VERSION v1.2.3 (or 1.2.3)  -> chart 1.2.3,      tags v1.2.3 (or 1.2.3)
    IMAGE_VERSION v1.3.0-rc.1        -> chart 1.3.0-rc.1, tags v1.3.0-rc.1
    IMAGE_VERSION dev (the default)  -> chart 0.0.0-dev,  tags dev

The output is <chart name>-<chart version>.tgz. The rule computes that name
here (Bazel declares outputs before running anything); chartpkg computes it
again and fails the action if the two disagree, so this mapping cannot drift
from tools/chartpkg/chartpack/version.go unnoticed.
"""

def _is_number(s):
    return s.isdigit() and (s == "0" or not s.startswith("0"))

def _idents_ok(s, prerelease):
    for ident in s.split("."):
        # isalnum is ASCII letters and digits in Starlark.
        if ident == "" or not ident.replace("-", "a").isalnum():
            return False
        if prerelease and ident.isdigit() and not _is_number(ident):
            return False
    return True

def is_semver(v):
    """Whether v is a SemVer 2 version (MAJOR.MINOR.PATCH[-PRE][+BUILD]).

    Args:
      v: the version string.

    Returns:
      True when v is SemVer 2.
    """
    rest, plus, build = v.partition("+")
    if plus and not _idents_ok(build, False):
        return False
    core, dash, pre = rest.partition("-")
    if dash and not _idents_ok(pre, True):
        return False
    parts = core.split(".")
    if len(parts) != 3:
        return False
    for p in parts:
        if not _is_number(p):
            return False
    return True

def chart_version(image_version):
    """The chart version for an image version (see the module docstring).

    Args:
      image_version: IMAGE_VERSION, the images' tag.

    Returns:
      The SemVer 2 chart version.
    """
    core = image_version[1:] if image_version.startswith("v") else image_version
    if is_semver(core):
        return core
    if is_semver("0.0.0-" + image_version):
        return "0.0.0-" + image_version
    fail(("IMAGE_VERSION %r maps to no SemVer 2 chart version: use a SemVer version " +
          "(v1.2.3) or dot-separated [0-9A-Za-z-] parts (dev, main, sha-0a1b2c3)") % image_version)

def _helm_chart_package_impl(ctx):
    image_version = ctx.var.get("IMAGE_VERSION", ctx.attr.version)
    chart_name = ctx.attr.chart_name or ctx.label.package.split("/")[-1]
    name = "%s-%s.tgz" % (chart_name, chart_version(image_version))
    out = ctx.actions.declare_file(name)

    # Chart paths are relative to this package's directory, the chart root.
    root = ctx.label.package + "/"
    args = ctx.actions.args()
    args.add("--image-version", image_version)
    args.add("--expect-name", name)
    args.add("--out", out)
    for f in ctx.files.srcs:
        if not f.short_path.startswith(root):
            fail("%s is not inside the chart directory %s" % (f.short_path, root))
        args.add("--file", "%s=%s" % (f.short_path[len(root):], f.path))
    ctx.actions.run(
        executable = ctx.executable._tool,
        arguments = [args],
        inputs = ctx.files.srcs,
        outputs = [out],
        mnemonic = "HelmChartPackage",
        progress_message = "Packaging Helm chart %s at %s" % (chart_name, image_version),
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

helm_chart_package = rule(
    implementation = _helm_chart_package_impl,
    doc = "Packages the Helm chart in this package's directory as <name>-<version>.tgz, stamped with IMAGE_VERSION.",
    attrs = {
        "srcs": attr.label_list(
            doc = "The chart's files, at their paths under this package (files of subpackages, such as crds/, included by label). .helmignore, when among them, still applies.",
            allow_files = True,
            mandatory = True,
        ),
        "chart_name": attr.string(
            doc = "The chart's name (Chart.yaml's name); defaults to the package's directory name.",
        ),
        "version": attr.string(
            doc = "The image version unless --define IMAGE_VERSION is set.",
            default = "dev",
        ),
        "_tool": attr.label(
            default = "//tools/chartpkg",
            executable = True,
            cfg = "exec",
        ),
    },
)
