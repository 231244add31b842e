#!/usr/bin/env bash
# Runs shellcheck on every shell script in the repository
# (//tools/lint:shellcheck_test).
#
# A script is any file whose first line is a sh/bash/dash/ksh shebang, or any
# *.sh or *.bash file; the test finds them itself in the source tree (outside
# .git, node_modules and Bazel's convenience symlinks), so a new script is
# checked without being listed anywhere. It reads the tree in place, which is
# why its target is tagged no-sandbox and external: it runs on every
# `bazel test`, never from a cached result.
#
# The binary comes from the build: tools/bazel installs Debian's ShellCheck
# into the root Bazel runs in. Without it the test fails; it does not skip.
set -euo pipefail

# The workspace is where the runfile of //:MODULE.bazel points.
marker=${TEST_SRCDIR:?run this under bazel test}/${TEST_WORKSPACE:-_main}/MODULE.bazel
workspace=$(dirname "$(readlink -f "$marker")")
[[ -f "$workspace/go.mod" ]] || { echo "cannot find the source tree (from $marker)" >&2; exit 1; }

if ! command -v shellcheck >/dev/null; then
  echo "FAIL: shellcheck is not installed. tools/bazel installs Debian's shellcheck into" >&2
  echo "the root Bazel runs in (tools/build/provision.sh, ROOT_PACKAGES); under bazelisk" >&2
  echo "install shellcheck on the machine." >&2
  exit 1
fi

cd "$workspace"
scripts=()
while IFS= read -r -d '' f; do
  scripts+=("${f#./}")
done < <(find . \( -name .git -o -name node_modules -o -path './bazel-*' \) -prune -o -type f -print0 |
  xargs -0 awk 'BEGIN { ORS = "\0" }
    FILENAME ~ /\.(sh|bash)$/ { print FILENAME; nextfile }
    FNR == 1 { if (/^#![^ ]*(\/| )(env +)?(ba|da|k)?sh( |$)/) print FILENAME; nextfile }' |
  LC_ALL=C sort -z)

[[ ${#scripts[@]} -gt 0 ]] || { echo "FAIL: found no shell scripts in $workspace" >&2; exit 1; }
echo "$(shellcheck --version | sed -n 's/^version: /shellcheck /p') on ${#scripts[@]} scripts:"
printf '  %s\n' "${scripts[@]}"
# --external-sources follows `source` lines to files named by `# shellcheck
# source=` directives (paths relative to the workspace root).
shellcheck --external-sources --source-path=. "${scripts[@]}"
echo "PASS"
