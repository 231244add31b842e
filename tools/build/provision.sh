#!/usr/bin/env bash
# tools/build/provision.sh: provisions the offline Bazel toolchain that
# tools/bazel runs on machines reaching only the Go module proxy, the Debian
# archive and the npm registry (docs/build.md walks through each step):
#   - Debian sid's bazel-bootstrap inside a debootstrapped root (sid is the
#     only Debian suite with a Bazel that has bzlmod), plus the Debian
#     packages tests use (containerd and friends, shellcheck, Prometheus);
#   - rules_go and gazelle taken from the Go module proxy;
#   - the stand-in modules checked in under tools/build/stubs;
#   - every Go module go.mod names, and the pinned Go SDK;
#   - the simulator's base template root filesystem (tools/build/rootfs.sh)
#     and the code-interpreter layer over it (tools/build/rootfs-ci.sh);
#   - an opt-in bazelrc that points Bazel at all of the above.
# Each step builds into a temporary directory and renames it into place when
# complete, so an interrupted run leaves nothing half-made behind; a lock
# serialises concurrent runs. A second run finds everything in place and
# returns in a fraction of a second.
#
# The versions come from where the build itself reads them: rules_go and
# gazelle from MODULE.bazel's bazel_dep lines, the Go SDK from go.mod's
# toolchain line, Bazel from .bazelversion (checked against the root's).
#
#   tools/build/provision.sh          provision (root only)
#   tools/build/provision.sh --pins   print the versions it would provision
set -euo pipefail

ws=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)

# pin NAME FILE SED: the one value SED prints from FILE, or a clear failure.
pin() {
  local v
  v=$(sed -n "$3" "$ws/$2")
  if [[ -z "$v" || "$v" == *$'\n'* ]]; then
    printf 'tools/bazel: error: cannot read the %s version from %s\n' "$1" "$2" >&2
    exit 1
  fi
  printf '%s\n' "$v"
}
RULES_GO_VERSION=v$(pin rules_go MODULE.bazel 's/^bazel_dep(name = "rules_go", version = "\([^"]*\)".*/\1/p')
GAZELLE_VERSION=v$(pin gazelle MODULE.bazel 's/^bazel_dep(name = "gazelle", version = "\([^"]*\)".*/\1/p')
GO_VERSION=$(pin "Go toolchain" go.mod 's/^toolchain go\([0-9][0-9.]*\)$/\1/p')
BAZEL_VERSION=$(pin Bazel .bazelversion '/^[0-9]/p')
readonly RULES_GO_VERSION GAZELLE_VERSION GO_VERSION BAZEL_VERSION

if [[ "${1:-}" == --pins ]]; then
  printf 'rules_go %s\ngazelle %s\ngo %s\nbazel %s\n' \
    "$RULES_GO_VERSION" "$GAZELLE_VERSION" "$GO_VERSION" "$BAZEL_VERSION"
  exit 0
fi

# shellcheck source=tools/build/offline.sh
. "$ws/tools/build/offline.sh"

readonly BAZEL_SUITE=sid

# ROOT_PACKAGES are the Debian packages the build's tests run, installed into
# the same root as Bazel and found there on PATH; a root made before a package
# was added gets it on its next run.
#  - The local Kubernetes cluster's node (the test cluster in tests/cluster and
#    //tools/localcluster): a container runtime, the CNI plugins and the tools
#    kube-proxy and the bridge plugin call.
#  - shellcheck, which //tools/lint:shellcheck_test runs on every shell script.
#  - e2fsprogs: mkfs.ext4 makes each isolated machine's bounded disk.
readonly ROOT_PACKAGES="containerd runc containernetworking-plugins iptables iproute2 conntrack kmod util-linux shellcheck e2fsprogs prometheus"

# One provisioning at a time; concurrent invocations wait here. The lock goes
# with this process, before Bazel starts.
exec 9>"$cache/.lock"
flock 9

goproxy=$(go env GOPROXY)
export GOFLAGS=-mod=mod

# apt_mirror (the host's Debian mirror) is the rootfs scripts' too.
# shellcheck source=tools/build/apt-mirror.sh
. "$ws/tools/build/apt-mirror.sh"

provision_root() {
  [[ -f "$root/.complete-$LAYOUT" ]] && return 0
  command -v debootstrap >/dev/null || {
    log "installing debootstrap from the Debian archive"
    apt-get update -qq >/dev/null && apt-get install -y -qq debootstrap >/dev/null
  }
  local mirror tmp=$cache/bazel-root.tmp
  mirror=$(apt_mirror)
  log "provisioning a Debian $BAZEL_SUITE root with Bazel $BAZEL_VERSION (one time, ~1 min)"
  rm -rf "$tmp" "$root"
  debootstrap --variant=minbase "$BAZEL_SUITE" "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $cache/debootstrap.log"
  # The host reaches its registries through CAs the fresh root may lack.
  cp -L /etc/ssl/certs/ca-certificates.crt "$tmp/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || true
  # The archive may be a dated snapshot, whose Release files have expired.
  echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99snapshot"
  in_root "$tmp" apt-get update -qq >>"$cache/debootstrap.log" 2>&1 ||
    die "apt-get update in the $BAZEL_SUITE root failed; see $cache/debootstrap.log"
  in_root "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    bazel-bootstrap bazel-rules-shell git ca-certificates gcc g++ libc6-dev >>"$cache/debootstrap.log" 2>&1 ||
    die "installing bazel-bootstrap in the $BAZEL_SUITE root failed; see $cache/debootstrap.log"
  in_root "$tmp" apt-get clean >/dev/null 2>&1 || true
  touch "$tmp/.complete-$LAYOUT"
  mv "$tmp" "$root"
}

# check_bazel_version fails unless the root's Bazel is the one .bazelversion
# names (what bazelisk would run), read from the root's package database.
check_bazel_version() {
  local deb have
  deb=$(awk '/^Package: /{p = ($2 == "bazel-bootstrap")} p && /^Version: /{print $2; exit}' "$root/var/lib/dpkg/status")
  have=${deb%%[+~-]*}
  [[ "$have" == "$BAZEL_VERSION" ]] && return 0
  die "the provisioned Bazel is ${have:-missing} (Debian sid's bazel-bootstrap ${deb:-not installed}), but .bazelversion names $BAZEL_VERSION. This path can only provision the Bazel Debian sid ships: make .bazelversion name it, or build with bazelisk (or SANDBOX_OPERATOR_BAZEL=/path/to/bazel-$BAZEL_VERSION). A root left from an older run is rebuilt after: rm -rf $root"
}

provision_packages() {
  local stamp=$root/.root-packages
  [[ -f "$stamp" && $(cat "$stamp") == "$ROOT_PACKAGES" ]] && return 0
  log "installing Debian packages the tests use into the root: $ROOT_PACKAGES"
  in_root "$root" apt-get update -qq >>"$cache/debootstrap.log" 2>&1 ||
    die "apt-get update in the $BAZEL_SUITE root failed; see $cache/debootstrap.log"
  # shellcheck disable=SC2086 # a word list on purpose
  in_root "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $ROOT_PACKAGES >>"$cache/debootstrap.log" 2>&1 ||
    die "installing the root's packages failed; see $cache/debootstrap.log"
  in_root "$root" apt-get clean >/dev/null 2>&1 || true
  echo "$ROOT_PACKAGES" >"$stamp"
}

# trust_host_cas makes the root trust every CA the host trusts. A machine
# behind a TLS-inspecting egress proxy adds its own CA to the host bundle;
# Bazel's JVM reads the root's Java keystore, which update-ca-certificates
# rebuilds from /usr/local/share/ca-certificates. A changed set of CAs
# restarts the Bazel server (see the server key below), since a running JVM
# keeps the keystore it loaded.
trust_host_cas() {
  local bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
  [[ -r "$bundle" ]] || return 0
  local sum stamp=$root/.host-cas
  sum=$(sha256sum <"$bundle" | cut -c1-16)
  [[ -f "$stamp" && $(cat "$stamp") == "$sum" ]] && return 0
  local dir=$root/usr/local/share/ca-certificates/host
  rm -rf "$dir" && mkdir -p "$dir"
  awk -v dir="$dir" '
    /-----BEGIN CERTIFICATE-----/ { n++; out = sprintf("%s/host-%04d.crt", dir, n) }
    out != "" { print > out }
    /-----END CERTIFICATE-----/ { close(out); out = "" }
  ' "$bundle"
  in_root "$root" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates in the root failed"
  echo "$sum" >"$stamp"
}

# fetch_module copies a module out of the module cache into $1, restoring the
# executable bits that module zips drop. $1/.complete names the version there.
fetch_module() {
  local dest=$1 mod=$2 dir tmp=$1.tmp
  [[ -f "$dest/.complete" && $(cat "$dest/.complete") == "$mod" ]] && return 0
  dir=$(cd "$work" && GOPROXY=$goproxy go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d "$dir" ]] || die "could not download $mod from the Go module proxy"
  rm -rf "$tmp"
  mkdir -p "$(dirname "$dest")"
  cp -r "$dir" "$tmp"
  chmod -R u+w "$tmp"
  grep -rlI '^#!' "$tmp" | xargs -r chmod +x
  if [[ "$mod" == github.com/bazelbuild/bazel-gazelle@* ]]; then
    # gazelle builds its repository tools from a vendor tree in GOPATH mode.
    (cd "$tmp" && go mod vendor -e >/dev/null 2>&1) || die "go mod vendor failed for $mod"
  fi
  echo "$mod" >"$tmp/.complete"
  rm -rf "$dest"
  mv "$tmp" "$dest"
}

# provision_rules fetches rules_go and gazelle.
provision_rules() {
  local stamp=$work/.complete-$LAYOUT-$RULES_GO_VERSION-$GAZELLE_VERSION
  [[ -f "$stamp" ]] && return 0
  log "fetching rules_go $RULES_GO_VERSION and gazelle $GAZELLE_VERSION from the Go module proxy"
  [[ -f "$work/go.mod" ]] || printf 'module launcher\n' >"$work/go.mod"
  fetch_module "$work/modules/rules_go" "github.com/bazelbuild/rules_go@$RULES_GO_VERSION"
  fetch_module "$work/modules/gazelle" "github.com/bazelbuild/bazel-gazelle@$GAZELLE_VERSION"
  touch "$stamp"
}

# provision_stubs copies the stand-in modules checked in under
# tools/build/stubs into the work area, whose path the bazelrc names (several
# checkouts may share one cache, so it never points into one of them).
readonly STUBS="protobuf zlib apple_support buildozer package_metadata"
provision_stubs() {
  local src=$workspace/tools/build/stubs dest=$work/stubs
  diff -r -q "$src" "$dest" >/dev/null 2>&1 && return 0
  rm -rf "$dest.tmp"
  cp -r "$src" "$dest.tmp"
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
}

# prefetch_modules fills the host module cache with everything go.mod names,
# plus the pinned Go SDK, so no Bazel repository rule needs the network.
prefetch_modules() {
  local sum stamp=$work/.modules
  sum=$( (cat "$workspace/go.mod" "$workspace/go.sum" 2>/dev/null; echo "$RULES_GO_VERSION $GAZELLE_VERSION") | sha256sum | cut -c1-16)
  [[ -f "$stamp" && $(cat "$stamp") == "$sum" ]] && return 0
  log "downloading Go modules named by go.mod (Go module proxy)"
  (cd "$workspace" && go mod download) || die "go mod download failed"
  (cd "$work/modules/rules_go" && go mod download) >/dev/null 2>&1 || true
  (cd "$work" && go mod download "golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$(go env GOARCH)") ||
    die "could not download the pinned Go $GO_VERSION toolchain"
  echo "$sum" >"$stamp"
}

# provision_base_rootfs makes the root filesystem simulated sandboxes run
# over (tools/build/rootfs.sh, which has its own lock and returns at once when
# it is in place) and sets base_rootfs to its directory, for the bazelrc.
provision_base_rootfs() {
  base_rootfs=$("$workspace/tools/build/rootfs.sh") || die "provisioning the base root filesystem failed (tools/build/rootfs.sh)"
}

# provision_ci_rootfs makes the code-interpreter layer the e2b-ci template
# stacks over the base (tools/build/rootfs-ci.sh, which also returns at once
# when it is in place) and sets ci_rootfs to its directory, for the bazelrc.
provision_ci_rootfs() {
  ci_rootfs=$("$workspace/tools/build/rootfs-ci.sh") || die "provisioning the code-interpreter layer failed (tools/build/rootfs-ci.sh)"
}

# npm_registry prints the npm registry this machine is configured with (the
# environment first, then npm's own configuration), or nothing. Bazel runs in
# a root without npm, so the address is resolved here and passed on.
npm_registry() {
  local r=${NPM_CONFIG_REGISTRY:-${npm_config_registry:-}}
  if [[ -z "$r" ]] && command -v npm >/dev/null 2>&1; then
    r=$(npm config get registry 2>/dev/null || true)
  fi
  printf '%s' "$r"
}

# go_arch prints this machine's CPU as Go names it.
go_arch() {
  case $(uname -m) in
  x86_64 | amd64) echo amd64 ;;
  aarch64 | arm64) echo arm64 ;;
  *) die "no image platform for this machine's CPU ($(uname -m))" ;;
  esac
}

# offline_rc writes the opt-in bazelrc that wires Bazel to the provisioned parts.
offline_rc() {
  local registry s
  registry=$(npm_registry)
  {
    echo "# Generated by tools/build/provision.sh for machines without the Bazel Central Registry."
    echo "startup --output_user_root=$work/output"
    echo "common --noenable_workspace"
    echo "common --lockfile_mode=off"
    echo "common --override_module=rules_go=$work/modules/rules_go"
    echo "common --override_module=gazelle=$work/modules/gazelle"
    echo "common --override_module=rules_shell=/usr/share/bazel/rules/shell"
    for s in $STUBS; do
      echo "common --override_module=$s=$work/stubs/$s"
    done
    # The repository of coverage tools Bazel's own tools name (every query
    # of rdeps(//..., …) loads it, and `bazel coverage` runs it) is
    # downloaded from the internet; a stand-in takes its place.
    echo "common --override_repository=bazel_tools~remote_coverage_tools_extension~remote_coverage_tools=$work/stubs/remote_coverage_tools"
    echo "common --repo_env=GO_REPOSITORY_USE_HOST_CACHE=1"
    echo "common --repo_env=GOMODCACHE=$gomodcache"
    echo "common --repo_env=GOPROXY=off"
    echo "common --repo_env=GOSUMDB=off"
    echo "common --repo_env=GOFLAGS="
    # Debian's Bazel package turns on --sandbox_debug in its system bazelrc,
    # which keeps every action's sandbox directory: tens of GB per build of
    # this repository, enough to fill a CI machine's disk.
    echo "build --nosandbox_debug"
    # Actions and tests run as the root user they are started by, with no
    # namespace of Bazel's around them: the tests that start isolated
    # machines make mounts, cgroups, user namespaces and loop devices,
    # which linux-sandbox's own user namespace would refuse.
    echo "build --spawn_strategy=processwrapper-sandbox,local"
    # Build for rules_go's pure-Go platform of this machine's CPU, the one
    # the images' cross-builds name (images/image.bzl): the tests and this
    # CPU's image then share one configuration, and the Kubernetes libraries
    # and the standard library compile once for both instead of twice.
    echo "build --platforms=@io_bazel_rules_go//go/toolchain:linux_$(go_arch)"
    if [[ -n "$registry" ]]; then echo "common --repo_env=NPM_CONFIG_REGISTRY=$registry"; fi
    # Tests find the base template's root filesystem here (src/simulator/rootfs).
    # The path is the versioned tree, not the stable link, so a new tree
    # changes the tests' environment and they run again instead of coming
    # from the cache.
    echo "test --test_env=SANDBOX_OPERATOR_BASE_ROOTFS=$base_rootfs"
    echo "test --test_env=SANDBOX_OPERATOR_CI_ROOTFS=$ci_rootfs"
  } >"$rc.tmp"
  mv "$rc.tmp" "$rc"
}

# prune_output_bases deletes the Bazel output bases of workspaces that no
# longer exist (a CI clone that was removed, a moved checkout). Each holds a
# full build of this repository, and they would otherwise pile up on one disk.
prune_output_bases() {
  local base ws
  for base in "$work"/output/*/; do
    [[ -f "$base/README" ]] || continue
    ws=$(sed -n 's/^WORKSPACE: //p' "$base/README")
    [[ -n "$ws" && ! -e "$ws" ]] || continue
    echo "removing the Bazel output base of $ws, which no longer exists"
    # Deleting millions of small files takes minutes on a slow disk: move
    # the tree aside at once and delete it at idle I/O priority while the
    # build runs.
    mkdir -p "$work/trash"
    mv "${base%/}" "$work/trash/$(basename "$base").$$" || continue
  done
  if [[ -n "$(ls -A "$work/trash" 2>/dev/null)" ]]; then
    local idle=()
    if command -v ionice >/dev/null; then idle=(ionice -c 3); fi
    (nice -n 19 "${idle[@]}" rm -rf "$work/trash" >/dev/null 2>&1 &)
  fi
}

# restart_stale_server stops the Bazel server of this workspace if the
# workspace or the root was replaced since it started. A server outlives its
# client inside the mount namespace it started in, and that namespace would
# show it stale directories.
restart_stale_server() {
  local key keyfile
  key="$(stat -c %i "$workspace") $(stat -c %Y "$root/.complete-$LAYOUT") $(cat "$root/.host-cas" 2>/dev/null) $MOUNTS"
  mkdir -p "$work/output"
  keyfile=$work/output/.server-key-$(printf '%s' "$workspace" | sha256sum | cut -c1-16)
  if [[ -f "$keyfile" && $(cat "$keyfile") != "$key" ]]; then
    # Expanded inside the root.
    # shellcheck disable=SC2016
    in_root "$root" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$workspace" "${bazel_cmd[@]}" shutdown >/dev/null 2>&1 || true
  fi
  echo "$key" >"$keyfile"
}

provision_root
check_bazel_version
provision_packages
trust_host_cas
provision_rules
provision_stubs
prefetch_modules
provision_base_rootfs
provision_ci_rootfs
offline_rc
prune_output_bases
restart_stale_server
