# shellcheck shell=bash
# The variables set here are used by the scripts that source this file.
# shellcheck disable=SC2034
# tools/build/offline.sh: what tools/build/provision.sh and
# tools/build/run-bazel.sh share. Sourced, never run.
#
# The offline toolchain lives in a cache outside the repository
# (${SANDBOX_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-operator}):
#   bazel-root/   a Debian sid root holding Bazel, its JDK and the test tools
#   work/         everything Bazel reads or writes, at the same path inside
#                 the root and out: rules_go, gazelle, the stand-in modules,
#                 the offline bazelrc and Bazel's output
#   rootfs/       the simulator's base template root filesystem
#                 (tools/build/rootfs.sh), at the same path inside the root
#                 and out, read-only inside

log() { printf 'tools/bazel: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

workspace=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cache=${SANDBOX_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-operator}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd -P)
root=$cache/bazel-root          # the sid root holding Bazel and its JDK
work=$cache/work                # everything Bazel reads or writes, same path inside and out
rc=$work/offline.bazelrc        # the opt-in bazelrc provision.sh writes
rootfs=$cache/rootfs            # what tools/build/rootfs.sh provisions
mkdir -p "$work" "$rootfs"

[[ $(id -u) -eq 0 ]] || die "provisioning Bazel needs root (debootstrap, chroot, unshare); run as root or use bazelisk"
command -v go >/dev/null || die "a Go toolchain on PATH is needed to fetch modules from the Go module proxy"
gomodcache=$(go env GOMODCACHE)
# The cache is bind-mounted into the root; on a machine that never fetched
# a module it does not exist yet.
mkdir -p "$gomodcache"

# Bumped whenever the layout of the provisioned root changes; a root made
# under another layout is rebuilt.
readonly LAYOUT=2

# in_root runs a command with $1 as its root (pivot_root) and /proc, /dev, /sys, the work
# area, the base root filesystems (read-only) and the colon-separated paths in
# IN_ROOT_BINDS mounted, all inside a private mount namespace that dies with
# the command.
in_root() {
  local r=$1; shift
  # The script is expanded by the inner bash, not here.
  # shellcheck disable=SC2016
  unshare --mount --propagation private -- /bin/bash -euc '
    r=$1; work=$2; ws=$3; rootfs=$4; shift 4
    # The root becomes a mount point of its own, so inside the chroot "/"
    # appears in /proc/self/mountinfo (containerd looks its directories up
    # there, and mount propagation of "/" can be changed).
    mount --bind "$r" "$r"
    mount -t proc proc "$r/proc"
    mount --rbind /dev "$r/dev"
    # The local cluster (tests/cluster) runs containerd and a kubelet, which
    # need sysfs and the cgroup hierarchies.
    mount --rbind /sys "$r/sys"
    mkdir -p "$r$work"; mount --bind "$work" "$r$work"
    # Tests and `bazel run` targets start sandboxes over the base root
    # filesystem, at the path SANDBOX_OPERATOR_BASE_ROOTFS names; read-only,
    # because every sandbox shares it and none may change it.
    mkdir -p "$r$rootfs"; mount --bind "$rootfs" "$r$rootfs"
    mount -o remount,bind,ro "$r$rootfs"
    IFS=: read -ra binds <<<"$ws"
    for b in "${binds[@]}"; do [[ -n "$b" ]] || continue; mkdir -p "$r$b"; mount --bind "$b" "$r$b"; done
    for f in /etc/hosts /etc/resolv.conf; do [[ -e $f ]] && cp -L "$f" "$r$f" 2>/dev/null || true; done
    # pivot_root rather than chroot: a chrooted process may not create a
    # user namespace, and the simulator gives each isolated machine one.
    mkdir -p "$r/.host-root"
    cd "$r"
    pivot_root . .host-root
    umount -l /.host-root
    cd /
    exec "$@"
  ' in_root "$r" "$work" "${IN_ROOT_BINDS:-}" "$rootfs" "$@"
}

# MOUNTS names the set of mounts in_root makes: a server started under an
# older set lacks the newer mounts (e.g. /sys), so a change restarts it.
readonly MOUNTS="root proc dev sys work rootfs pivot"

# The Bazel command line inside the root.
bazel_cmd=(/usr/bin/bazel --bazelrc="$rc" --max_idle_secs=10800)
if [[ -n "${SANDBOX_OPERATOR_BAZEL_STARTUP:-}" ]]; then
  read -ra startup <<<"$SANDBOX_OPERATOR_BAZEL_STARTUP"
  bazel_cmd+=("${startup[@]}")
fi
# The workspace and the module cache appear at the same paths inside the root.
export IN_ROOT_BINDS=$workspace:$gomodcache
