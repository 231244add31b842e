"""package_metadata as gazelle's generated repositories load it; it records nothing."""

def _package_metadata_impl(ctx):
    return []

_package_metadata = rule(
    implementation = _package_metadata_impl,
    attrs = {
        "purl": attr.string(),
        "attributes": attr.label_list(),
    },
)

def package_metadata(**kwargs):
    # The package's default metadata would otherwise apply to this target
    # itself and form a cycle.
    _package_metadata(applicable_licenses = [], **kwargs)
