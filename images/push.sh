#!/usr/bin/env bash
# Run by `bazel run //images:push -- [--tag T] [--repository-prefix P]`.
# Bazel passes the images tool and the layout tars first (BUILD.bazel's
# args), then the caller's flags; the tool takes flags and layouts in any
# order. bazel run starts this in the runfiles tree, where those paths hold.
set -euo pipefail
tool="$1"
shift
exec "${tool}" push "$@"
