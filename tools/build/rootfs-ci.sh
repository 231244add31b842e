#!/usr/bin/env bash
# tools/build/rootfs-ci.sh: provisions the code-interpreter layer of the
# simulator's `e2b-ci` template (docs/simulator.md, "Code-interpreter
# guest"): Debian's IPython kernel, jupyter_client, numpy, pandas and
# matplotlib, kept as an overlay layer over the base root filesystem
# (tools/build/rootfs.sh) rather than a second full tree, so the base stays
# small and the layer holds only what the packages add. tools/build/provision.sh
# runs it after the base; it also runs on its own:
#
#   tools/build/rootfs-ci.sh     provision (root only), then print the directory
#
# It lives next to the base tree, in the same per-user cache:
#   <cache>/rootfs/e2b-ci-<hash>/   the layer; <hash> covers the base tree's
#                                   version, the package list and
#                                   CI_LAYOUT, so a new base or list
#                                   provisions anew
#   <cache>/rootfs/e2b-ci           symlink to the current layer
# Consumers are told the directory through SANDBOX_OPERATOR_CI_ROOTFS
# (src/simulator/rootfs), and only trust a layer holding the marker written
# last, etc/sandbox-operator/rootfs-ci, whose base= line names the base tree
# it was computed over.
#
# How the layer is made: the base tree is mounted read-only as the lower
# layer of an overlay in a private mount namespace, apt installs the
# packages into the merged view (chrooted), and the overlay's upper
# directory, cleaned of apt's lists and caches, is the layer. The same
# conventions as rootfs.sh: a temporary directory renamed into place when
# complete, a lock so concurrent runs wait for each other, and an
# immediate return when the layer is already there.
set -euo pipefail

log() { printf 'tools/build/rootfs-ci.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

# What e2b's code-interpreter image offers a Python cell, from Debian's
# archive: a real IPython kernel and the client that drives it, and the
# usual data stack. Dependencies come in; recommended packages do not.
readonly PACKAGES="python3-ipykernel python3-jupyter-client python3-numpy python3-pandas python3-matplotlib"
# Bumped whenever what this script does to the layer changes.
readonly CI_LAYOUT=1
readonly MARKER=etc/sandbox-operator/rootfs-ci
readonly BASE_MARKER=etc/sandbox-operator/rootfs

# The base first (it returns at once when it is in place); the layer is
# only valid over the exact tree it was computed on.
base=$("$here/rootfs.sh") || die "provisioning the base root filesystem failed (tools/build/rootfs.sh)"
[[ -f "$base/$BASE_MARKER" ]] || die "the base tree $base has no $BASE_MARKER"
base_version=$(sed -n 's/^version=//p' "$base/$BASE_MARKER")
suite=$(sed -n 's/^suite=//p' "$base/$BASE_MARKER")
[[ -n "$base_version" && -n "$suite" ]] || die "cannot read the version and suite from $base/$BASE_MARKER"

cache=${SANDBOX_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-operator}
mkdir -p "$cache/rootfs"
dir=$(cd "$cache/rootfs" && pwd -P)
version=$(printf '%s\n' "$CI_LAYOUT" "$base_version" "$PACKAGES" | sha256sum | cut -c1-12)
layer=$dir/e2b-ci-$version
link=$dir/e2b-ci

done_already() {
  [[ -f "$layer/$MARKER" && $(readlink "$link" 2>/dev/null) == "e2b-ci-$version" ]]
}
if done_already; then
  printf '%s\n' "$layer"
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "provisioning the code-interpreter layer needs root (overlay mount, chroot); run tools/build/rootfs-ci.sh as root"

# Its own lock: rootfs.sh holds .lock only while it runs.
exec 7>"$dir/.lock-ci"
flock 7
if done_already; then
  printf '%s\n' "$layer"
  exit 0
fi

# apt_mirror (the host's Debian mirror) is shared with the other rootfs script.
# shellcheck source=tools/build/apt-mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-mirror.sh"

if [[ ! -f "$layer/$MARKER" ]]; then
  mirror=$(apt_mirror)
  tmp=$layer.tmp
  logfile=$dir/e2b-ci.log
  log "provisioning the code-interpreter layer (Debian $suite: $PACKAGES) over $base into $layer (one time, ~2 min)"
  rm -rf "$tmp"
  mkdir -p "$tmp/upper" "$tmp/work" "$tmp/merged"
  # Everything mounted here lives in a private mount namespace that dies
  # with the command, so an interrupted run leaves no mount behind.
  # The overlay options keep the upper directory self-contained: no
  # metadata-only copies or directory redirects that point into the lower
  # layer, no index tied to this mount.
  # The script is expanded by the inner bash; PACKAGES is a word list.
  # shellcheck disable=SC2016,SC2086
  unshare --mount --propagation private -- /bin/bash -euc '
    base=$1 tmp=$2 mirror=$3 suite=$4; shift 4
    m=$tmp/merged
    mount -t overlay overlay \
      -o "lowerdir=$base,upperdir=$tmp/upper,workdir=$tmp/work,redirect_dir=off,index=off,metacopy=off" "$m"
    mount -t proc proc "$m/proc"
    mount --rbind /dev "$m/dev"
    mount -t tmpfs tmpfs "$m/tmp"
    # The tree resolves names with the host resolver during the install;
    # a bind mount, so the base placeholder is what stays in the layer.
    mount --bind /etc/resolv.conf "$m/etc/resolv.conf"
    printf "deb %s %s main\n" "$mirror" "$suite" >"$m/etc/apt/sources.list"
    # The archive may be a dated snapshot, whose Release files have expired.
    echo "Acquire::Check-Valid-Until \"false\";" >"$m/etc/apt/apt.conf.d/99sandbox-operator-build"
    export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
    chroot "$m" apt-get update -qq
    chroot "$m" apt-get install -y -qq --no-install-recommends "$@"
    chroot "$m" apt-get clean
  ' bash "$base" "$tmp" "$mirror" "$suite" $PACKAGES >"$logfile" 2>&1 ||
    die "installing the packages failed; see $logfile"

  up=$tmp/upper
  # Drop what the build itself left in the layer: the sources and apt
  # setting written above (removing them from the upper directory uncovers
  # the base's own), the archive's package lists and apt's caches (a
  # sandbox fetches fresh lists if it gets a network), and mount points.
  rm -f "$up/etc/apt/sources.list" "$up/etc/apt/apt.conf.d/99sandbox-operator-build"
  find "$up/var/lib/apt/lists" -type f ! -name lock -delete 2>/dev/null || true
  rm -f "$up"/var/cache/apt/*.bin
  rm -rf "${up:?}/tmp" "${up:?}/proc" "${up:?}/dev" "${up:?}/etc/resolv.conf"
  for d in tmp proc dev; do
    # An upper directory over an existing lower one is only a copy-up of
    # its metadata; removing it leaves the base's as it is.
    [[ -e "$base/$d" ]] || die "the base tree lacks /$d"
  done

  mkdir -p "$(dirname "$up/$MARKER")"
  printf 'template=e2b-ci\nversion=%s\nbase=%s\nsuite=%s\npackages=%s\n' \
    "$version" "$base_version" "$suite" "$PACKAGES" >"$up/$MARKER"
  rm -rf "$layer"
  mv "$up" "$layer"
  rm -rf "$tmp"
fi

ln -sfn "e2b-ci-$version" "$link.tmp"
mv -T "$link.tmp" "$link"
for old in "$dir"/e2b-ci-*; do
  [[ -d "$old" && "$old" != "$layer" && "$old" != *.tmp ]] || continue
  log "removing the superseded $old"
  rm -rf "$old"
done
printf '%s\n' "$layer"
