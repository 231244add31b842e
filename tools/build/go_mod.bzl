"""go.mod as the one place the Go and Kubernetes versions are pinned.

Starlark cannot read files, but a module extension can. `parse_go_mod`
reads the toolchain line and the module versions from go.mod (replacements
applied); go_toolchain.bzl takes the Go SDK version from it, and the
`go_mod_versions` extension hands the versions to BUILD files and macros as
`@go_mod_versions//:versions.bzl`:

    GO_TOOLCHAIN   the release on go.mod's toolchain line, e.g. "1.26.8"
    MODULES        {module path: version} for every requirement
"""

def _strip_comment(line):
    i = line.find("//")
    return (line[:i] if i >= 0 else line).strip()

def parse_go_mod(content, path = "go.mod"):
    """Parses go.mod text.

    Args:
      content: the text of a go.mod file.
      path: its name, for error messages.

    Returns:
      struct(toolchain, modules): the Go release the toolchain line names
      (empty if there is none) and {module path: version} with every
      version-only replacement applied.
    """
    toolchain = ""
    modules = {}
    replaced = {}
    block = None
    for line in content.splitlines():
        line = _strip_comment(line)
        if not line:
            continue
        if block:
            if line == ")":
                block = None
                continue
            directive, rest = block, line
        else:
            directive, _, rest = line.replace("\t", " ").partition(" ")
            rest = rest.strip()
            if rest == "(":
                block = directive
                continue
        fields = [f for f in rest.replace("\t", " ").split(" ") if f]
        if directive == "toolchain" and fields and fields[0].startswith("go"):
            toolchain = fields[0][len("go"):]
        elif directive == "require" and len(fields) == 2:
            modules[fields[0]] = fields[1]
        elif directive == "replace" and "=>" in fields:
            arrow = fields.index("=>")
            new = fields[arrow + 1:]
            if len(new) == 2 and new[0] == fields[0]:
                replaced[fields[0]] = new[1]
    for mod, version in replaced.items():
        if mod in modules:
            modules[mod] = version
    if block:
        fail("%s: unterminated %s block" % (path, block))
    return struct(toolchain = toolchain, modules = modules)

def read_go_mod(mctx, label):
    """Reads and parses the go.mod file at label from a module extension."""
    return parse_go_mod(mctx.read(mctx.path(label)), str(label))

def _go_mod_versions_repo_impl(rctx):
    rctx.file("BUILD.bazel", 'exports_files(["versions.bzl"])\n')
    rctx.file("versions.bzl", "\n".join([
        '"""Versions read from %s by //tools/build:go_mod.bzl."""' % rctx.attr.go_mod,
        "",
        "GO_TOOLCHAIN = %r" % rctx.attr.toolchain,
        "MODULES = %r" % rctx.attr.modules,
        "",
    ]))

_go_mod_versions_repo = repository_rule(
    implementation = _go_mod_versions_repo_impl,
    attrs = {
        "go_mod": attr.string(),
        "toolchain": attr.string(),
        "modules": attr.string_dict(),
    },
)

def _go_mod_versions_impl(mctx):
    tags = [t for mod in mctx.modules for t in mod.tags.from_file]
    if len(tags) != 1:
        fail("go_mod_versions: exactly one from_file tag is expected, got %d" % len(tags))
    parsed = read_go_mod(mctx, tags[0].go_mod)
    _go_mod_versions_repo(
        name = "go_mod_versions",
        go_mod = str(tags[0].go_mod),
        toolchain = parsed.toolchain,
        modules = parsed.modules,
    )

go_mod_versions = module_extension(
    implementation = _go_mod_versions_impl,
    tag_classes = {"from_file": tag_class(attrs = {"go_mod": attr.label(mandatory = True)})},
)
