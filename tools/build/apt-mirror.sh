# shellcheck shell=bash
# tools/build/apt-mirror.sh: sourced by provision.sh, rootfs.sh and
# rootfs-ci.sh, which all fetch Debian packages from the mirror this
# machine is configured with; a registry's host name never goes into the
# repository.

# apt_mirror prints the host's Debian mirror, the first non-security URI of
# its apt sources (deb822 .sources files, then one-line .list files). The
# sourcing script defines die.
apt_mirror() {
  local uri
  uri=$( { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
           grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}'; } |
         grep -v -- '-security' | head -n1 )
  [[ -n "$uri" ]] || die "no Debian mirror found in the host's apt sources"
  printf '%s\n' "$uri"
}
