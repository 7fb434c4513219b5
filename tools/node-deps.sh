#!/usr/bin/env bash
# Installs what testenv's real nodes (testenv.Options.RealNodes, loom dev up
# --real-nodes) need beside the kubelet that tools/build.sh builds:
# containerd (with ctr and its runc shim), runc, the CNI plugins in
# /usr/lib/cni, iptables, nftables, conntrack, iproute2 (ip), util-linux
# (unshare) and mount, from Debian's packages with apt-get, when
# one of them is missing. It only installs: nothing is started or
# configured system-wide.
#
# Real nodes need root on Linux. Where the packages cannot be had (not root,
# no apt-get, no package index), it says why and exits 0, because fake
# (kwok) nodes keep working and the real-node tests skip; with CI=true that
# is a failure instead (exit 1), so a CI machine cannot skip them silently.
set -uo pipefail
# The system folders, where these live, may be missing from a user's PATH.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# command-or-file to check, and the Debian package that provides it.
deps=(
  "containerd containerd"
  "containerd-shim-runc-v2 containerd"
  "ctr containerd"
  "runc runc"
  "/usr/lib/cni/bridge containernetworking-plugins"
  "/usr/lib/cni/host-local containernetworking-plugins"
  "/usr/lib/cni/loopback containernetworking-plugins"
  "iptables iptables"
  "nft nftables"
  "conntrack conntrack"
  "ip iproute2"
  "unshare util-linux"
  "mount mount"
)

missing_pkgs=()
missing_what=()
for d in "${deps[@]}"; do
  what=${d% *} pkg=${d#* }
  if [[ $what == /* ]]; then
    [ -x "$what" ] && continue
  else
    command -v "$what" >/dev/null 2>&1 && continue
  fi
  missing_what+=("$what")
  [[ " ${missing_pkgs[*]} " == *" $pkg "* ]] || missing_pkgs+=("$pkg")
done

if [ ${#missing_pkgs[@]} -eq 0 ]; then
  echo "node-deps: containerd, runc, the CNI plugins, iptables, nftables and conntrack are installed"
  exit 0
fi

unavailable() {
  local why=$1
  if [ "${CI:-}" = true ]; then
    echo "node-deps: FAIL: real nodes need ${missing_pkgs[*]} (missing: ${missing_what[*]}): $why" >&2
    exit 1
  fi
  echo "node-deps: real nodes are unavailable on this machine: $why." >&2
  echo "node-deps: missing ${missing_what[*]}; install as root with: apt-get install -y ${missing_pkgs[*]}" >&2
  echo "node-deps: fake (kwok) nodes still work; the real-node tests will skip." >&2
  exit 0
}

[ "$(uname -s)" = Linux ] || unavailable "real nodes need Linux"
[ "$(id -u)" = 0 ] || unavailable "real nodes need root, and installing packages needs root"
command -v apt-get >/dev/null 2>&1 || unavailable "no apt-get to install ${missing_pkgs[*]} with"

echo "node-deps: installing ${missing_pkgs[*]} (missing: ${missing_what[*]})"
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d code 101 keeps the packages' scripts from starting a system
# containerd; a file that was already there is left alone.
policy=/usr/sbin/policy-rc.d
made_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1
fi
install() { apt-get install -y -q --no-install-recommends "${missing_pkgs[@]}"; }
if ! install; then
  apt-get update -q && install
fi
rc=$?
[ -n "$made_policy" ] && rm -f "$policy"
[ $rc -eq 0 ] || unavailable "apt-get install ${missing_pkgs[*]} failed (exit $rc)"
echo "node-deps: installed ${missing_pkgs[*]}"
