#!/usr/bin/env bash
# tools/build/rootfs.sh: provisions the root filesystem of the simulator's
# `base` template, the Debian system every simulated sandbox sees as `/`
# (docs/simulator.md, "Base root filesystem"). tools/build/provision.sh runs
# it, so `tools/bazel` provisions it once; it also runs on its own:
#
#   tools/build/rootfs.sh        provision (root only), then print the directory
#
# It lives in the same per-user cache as the Bazel root:
#   <cache>/rootfs/base-<suite>-<hash>/   the tree; <hash> covers the suite, the
#                                        package list and ROOTFS_LAYOUT, so a
#                                        change to any of them provisions anew
#   <cache>/rootfs/base                  symlink to the current tree, the
#                                        default that consumers resolve
# where <cache> is ${SANDBOX_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-operator}.
# Consumers are told the directory through SANDBOX_OPERATOR_BASE_ROOTFS
# (src/simulator/rootfs), and only trust a tree holding the marker written
# last, etc/sandbox-operator/rootfs.
#
# Like provision.sh, it builds into a temporary directory and renames it into
# place when complete, takes a lock so concurrent runs wait for each other,
# and returns at once when the tree is already there.
set -euo pipefail

log() { printf 'tools/build/rootfs.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Debian stable, pinned rather than read from the host, so every machine
# builds the same template; a machine whose apt sources name another release
# still reaches this one on the same mirror (the archive keeps stable and
# oldstable). It is also the suite this project's machines run.
readonly SUITE=bookworm
# What e2b's base template users expect to find, and nothing heavy: a shell
# and the usual tools (bash and coreutils are in minbase already, listed so
# the contract is written in one place), python3 and curl for the usual agent
# workloads, git, CA certificates for TLS, ps/top/kill (procps) and ip
# (iproute2). Dependencies come in; recommended packages do not.
readonly PACKAGES="bash coreutils python3 curl git ca-certificates procps iproute2"
# Bumped whenever what this script does to the tree changes (the user, the
# files under /etc), so a tree made by an older script is replaced.
readonly ROOTFS_LAYOUT=1
# The marker, written last: a tree without it is incomplete.
readonly MARKER=etc/sandbox-operator/rootfs

cache=${SANDBOX_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-operator}
mkdir -p "$cache/rootfs"
dir=$(cd "$cache/rootfs" && pwd -P)
version=$SUITE-$(printf '%s\n' "$ROOTFS_LAYOUT" "$SUITE" "$PACKAGES" | sha256sum | cut -c1-12)
tree=$dir/base-$version
link=$dir/base

# done_already: the current tree is complete and the link names it. Checked
# without the lock: the tree only ever appears by a rename once complete.
done_already() {
  [[ -f "$tree/$MARKER" && $(readlink "$link" 2>/dev/null) == "base-$version" ]]
}
if done_already; then
  printf '%s\n' "$tree"
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "provisioning the base root filesystem needs root (debootstrap, chroot); run tools/build/rootfs.sh as root"

# One provisioning at a time. This is not provision.sh's lock (it holds that
# one while it runs this script), so the two never wait on each other.
exec 8>"$dir/.lock"
flock 8
if done_already; then
  printf '%s\n' "$tree"
  exit 0
fi

# apt_mirror (the host's Debian mirror) is shared with the other rootfs script.
# shellcheck source=tools/build/apt-mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-mirror.sh"

if [[ ! -f "$tree/$MARKER" ]]; then
  command -v debootstrap >/dev/null || {
    log "installing debootstrap from the Debian archive"
    apt-get update -qq >/dev/null && apt-get install -y -qq debootstrap >/dev/null
  }
  mirror=$(apt_mirror)
  tmp=$tree.tmp
  logfile=$dir/debootstrap.log
  log "provisioning the sandbox base root filesystem (Debian $SUITE: $PACKAGES) into $tree (one time, ~1 min)"
  rm -rf "$tmp"
  # debootstrap resolves the included packages' dependencies itself, so no
  # apt run inside the tree (and no /proc or /dev mounted into it) is needed.
  debootstrap --variant=minbase --include="${PACKAGES// /,}" \
    "$SUITE" "$tmp" "$mirror" >"$logfile" 2>&1 ||
    die "debootstrap failed; see $logfile"
  # The downloaded packages and the archive's package lists (a sixth of the
  # tree) are not part of the template: a sandbox has no network to install
  # from, and where it gets one, `apt-get update` fetches fresh lists anyway.
  chroot "$tmp" apt-get clean >/dev/null 2>&1 || rm -f "$tmp"/var/cache/apt/archives/*.deb
  find "$tmp/var/lib/apt/lists" -type f ! -name lock -delete

  # The sandbox user: uid and gid 1000, as on e2b, with its home on the
  # writable layer the runtime puts over /home/user.
  useradd --root "$tmp" --create-home --home-dir /home/user --uid 1000 \
    --user-group --shell /bin/bash user >>"$logfile" 2>&1 ||
    die "creating the user in the tree failed; see $logfile"
  chown 1000:1000 "$tmp/home/user"

  # Placeholders the runtime replaces per sandbox: the hostname is the
  # sandbox's own (its UTS namespace), and the host's files must not leak in,
  # so debootstrap's copies of the host's hosts and resolv.conf are replaced.
  echo sandbox >"$tmp/etc/hostname"
  cat >"$tmp/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
ff02::1	ip6-allnodes
ff02::2	ip6-allrouters
EOF
  # A sandbox's network namespace has only its own loopback, so there is no
  # resolver to name; the file exists because programs expect to read it.
  rm -f "$tmp/etc/resolv.conf"
  echo '# The sandbox runtime writes its resolver here, if it gives the sandbox one.' >"$tmp/etc/resolv.conf"

  mkdir -p "$(dirname "$tmp/$MARKER")"
  printf 'template=base\nversion=%s\nsuite=%s\npackages=%s\n' \
    "$version" "$SUITE" "$PACKAGES" >"$tmp/$MARKER"
  rm -rf "$tree"
  mv "$tmp" "$tree"
fi

# Point the stable name at this tree (a rename, so readers never see it
# missing), then drop trees an older package list or suite made.
ln -sfn "base-$version" "$link.tmp"
mv -T "$link.tmp" "$link"
for old in "$dir"/base-*; do
  [[ -d "$old" && "$old" != "$tree" ]] || continue
  log "removing the superseded $old"
  rm -rf "$old"
done
printf '%s\n' "$tree"
