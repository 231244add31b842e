"""An empty buildozer_binary repository, so gazelle's module graph resolves."""

def _buildozer_repo_impl(rctx):
    rctx.file("BUILD.bazel", "")

_buildozer_repo = repository_rule(implementation = _buildozer_repo_impl)

def _buildozer_binary_impl(mctx):
    _buildozer_repo(name = "buildozer_binary")

buildozer_binary = module_extension(
    implementation = _buildozer_binary_impl,
    tag_classes = {"buildozer": tag_class(attrs = {"sha256": attr.string_dict(), "version": attr.string()})},
)
