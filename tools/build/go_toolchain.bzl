"""Pinned Go SDK fetched as the golang.org/toolchain module.

The Go module proxy serves every Go release as the module
golang.org/toolchain@v0.0.1-go<version>.<goos>-<goarch>. Module zips are
immutable, so their SHA-256 pins the SDK exactly. The proxy is read from the
environment (GOPROXY, else `go env GOPROXY`) at fetch time; a zip that is
already in the local module cache (GOMODCACHE) is used without any network.

The version is the one go.mod's toolchain line names (go_toolchain.from_file),
so go.mod is the one place it is written; the table below must hold its sums.
"""

load(":go_mod.bzl", "read_go_mod")

# SHA-256 of golang.org/toolchain@v0.0.1-go<version>.<platform>.zip.
_TOOLCHAIN_ZIPS = {
    "1.26.8": {
        "darwin-amd64": "fe99a2009e5bb51e06d7784f1a486478673512041c2671157bd382806e2aedcf",
        "darwin-arm64": "0aad5fb52b88498885290178adc0bcfe429bc63012621af9f83282eb640bd9c7",
        "linux-amd64": "30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7",
        "linux-arm64": "02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99",
    },
}

def _host_platform(rctx):
    os = rctx.os.name.lower()
    if os.startswith("linux"):
        goos = "linux"
    elif os.startswith("mac"):
        goos = "darwin"
    else:
        fail("go_toolchain: unsupported host OS %r" % rctx.os.name)
    arch = rctx.os.arch.lower()
    if arch in ("amd64", "x86_64"):
        goarch = "amd64"
    elif arch in ("aarch64", "arm64"):
        goarch = "arm64"
    else:
        fail("go_toolchain: unsupported host architecture %r" % rctx.os.arch)
    return goos + "-" + goarch

def _proxies(rctx):
    """Returns the module proxy base URLs configured for this machine."""
    raw = rctx.os.environ.get("GOPROXY", "")
    if not raw:
        go = rctx.which("go")
        if go:
            res = rctx.execute([go, "env", "GOPROXY"])
            if res.return_code == 0:
                raw = res.stdout.strip()
    out = []
    for part in raw.replace("|", ",").split(","):
        part = part.strip()
        if part and part not in ("direct", "off"):
            out.append(part.rstrip("/"))
    return out

def _go_sdk_pinned_impl(rctx):
    version = rctx.attr.version
    zips = _TOOLCHAIN_ZIPS.get(version)
    if not zips:
        fail("go_toolchain: no pinned SHA-256 for Go %s; add it to tools/build/go_toolchain.bzl" % version)
    platform = _host_platform(rctx)
    sha256 = zips.get(platform)
    if not sha256:
        fail("go_toolchain: Go %s is not pinned for %s" % (version, platform))

    mod_version = "v0.0.1-go%s.%s" % (version, platform)
    rel = "golang.org/toolchain/@v/%s.zip" % mod_version
    urls = []
    modcache = rctx.os.environ.get("GOMODCACHE", "")
    if modcache and rctx.path(modcache + "/cache/download/" + rel).exists:
        urls.append("file://" + modcache + "/cache/download/" + rel)
    urls.extend([p + "/" + rel for p in _proxies(rctx)])
    if not urls:
        fail("go_toolchain: no Go module proxy configured; set GOPROXY or install Go")

    rctx.report_progress("Fetching Go %s (%s) from the module proxy" % (version, platform))
    rctx.download_and_extract(
        url = urls,
        sha256 = sha256,
        type = "zip",
        stripPrefix = "golang.org/toolchain@%s" % mod_version,
    )

    # Module zips carry no file modes; Go marks bin/ and pkg/tool/ executable
    # when it installs a toolchain, so do the same.
    res = rctx.execute(["sh", "-c", "chmod -R a+x bin pkg/tool"])
    if res.return_code != 0:
        fail("go_toolchain: chmod: " + res.stderr)
    rctx.file("ROOT", "")
    rctx.file("BUILD.bazel", 'exports_files(["ROOT"])\n')

go_sdk_pinned = repository_rule(
    implementation = _go_sdk_pinned_impl,
    attrs = {"version": attr.string(mandatory = True)},
    environ = ["GOPROXY", "GOMODCACHE"],
)

def _go_toolchain_impl(mctx):
    tags = [t for mod in mctx.modules for t in mod.tags.from_file]
    if len(tags) != 1:
        fail("go_toolchain: exactly one go_toolchain.from_file is expected, got %d" % len(tags))
    version = read_go_mod(mctx, tags[0].go_mod).toolchain
    if not version:
        fail("go_toolchain: %s has no toolchain line; it pins the Go SDK (e.g. toolchain go1.26.8)" % tags[0].go_mod)
    go_sdk_pinned(name = "go_sdk_pinned", version = version)

go_toolchain = module_extension(
    implementation = _go_toolchain_impl,
    doc = "Pins the Go SDK to the release go.mod's toolchain line names.",
    tag_classes = {"from_file": tag_class(attrs = {"go_mod": attr.label(mandatory = True)})},
)
