#!/usr/bin/env bash
# tools/build/run-bazel.sh: runs one Bazel command with the offline toolchain
# tools/build/provision.sh made (tools/bazel runs that first). Bazel runs
# chrooted into the sid root inside a private mount namespace, so no mount
# outlives it; a client joins the namespace of a running server.
set -euo pipefail
# shellcheck source=tools/build/offline.sh
. "$(dirname "${BASH_SOURCE[0]}")/offline.sh"

[[ -f "$rc" ]] || die "the offline toolchain is not provisioned; run tools/bazel"

cwd=$(pwd -P)
[[ "$cwd/" == "$workspace/"* ]] || cwd=$workspace

# `bazel run` builds inside the root and writes a script instead of running
# the target; the script then runs in the root too (the target's runfiles point
# at Bazel's own tools there), with the caller's environment, working
# directory and /tmp visible at their usual paths, and told where the base
# root filesystem is.
cmd=${1:-}
script=""
args=("$@")
if [[ "$cmd" == run ]]; then
  script=$(mktemp "$work/run.XXXXXX")
  args=(run "--script_path=$script" "${@:2}")
fi

# The Bazel client only reuses a server whose working directory it can see
# at the same path, so a client joins the mount namespace and root of a
# running server instead of making a new one (which would restart it).
outbase=$work/output/$(printf '%s' "$workspace" | md5sum | cut -c1-32)
enter=(in_root "$root")
server_pid=$(cat "$outbase/server/server.pid.txt" 2>/dev/null || true)
if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null &&
   [[ $(readlink "/proc/$server_pid/root" 2>/dev/null) == "$root" ]]; then
  enter=(nsenter --target "$server_pid" --mount --root)
fi
client_env=(/usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
  TERM="${TERM:-dumb}" CI="${CI:-}")
set +e
# Expanded inside the root.
# shellcheck disable=SC2016
"${enter[@]}" "${client_env[@]}" \
  /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$cwd" "${bazel_cmd[@]}" "${args[@]}"
rc_bazel=$?
set -e
if [[ -n "$script" ]]; then
  if [[ $rc_bazel -eq 0 && -s "$script" ]]; then
    chmod +x "$script"
    # The target finds the base template's root filesystem as tests do
    # (src/simulator/rootfs), unless the caller named another.
    if [[ -z "${SANDBOX_OPERATOR_BASE_ROOTFS:-}" ]] && base=$(readlink -e "$rootfs/base"); then
      export SANDBOX_OPERATOR_BASE_ROOTFS=$base
    fi
    if [[ -z "${SANDBOX_OPERATOR_CI_ROOTFS:-}" ]] && ci=$(readlink -e "$rootfs/e2b-ci"); then
      export SANDBOX_OPERATOR_CI_ROOTFS=$ci
    fi
    IN_ROOT_BINDS=$IN_ROOT_BINDS:/tmp:$(pwd -P)
    set +e
    # shellcheck disable=SC2016
    in_root "$root" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$(pwd -P)" "$script"
    rc_bazel=$?
    set -e
  fi
  rm -f "$script"
fi
exit $rc_bazel
