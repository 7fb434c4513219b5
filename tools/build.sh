#!/usr/bin/env bash
# Builds the control-plane binaries Loom tests against, from Go modules only:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet,
# kube-proxy and kwok, plus kwok's stage configuration (kwok-stages.yaml), and the code generator
# controller-gen (from the tools/codegen module; `make generate` runs it).
#
# Versions come from testenv/versions.env (the one pinned list); tools/go.mod
# must agree with it. Binaries go to the per-user cache
#   ${XDG_CACHE_HOME:-$HOME/.cache}/loom/<versions>/bin
# or to $LOOM_ASSETS when set. Binaries already there are kept, so the build is
# idempotent and a fresh clone on the same machine reuses them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../testenv/versions.env
source "$here/../testenv/versions.env"

dir=${LOOM_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/loom/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}/bin}
mkdir -p "$dir"

cd "$here"
export GOFLAGS=-mod=mod

# tools/go.mod must build exactly the pinned versions.
check() {
  local mod=$1 want=$2 got
  got=$(go list -m -f '{{.Version}}' "$mod")
  if [ "$got" != "$want" ]; then
    echo "tools/go.mod has $mod $got, but testenv/versions.env pins $want; run: cd tools && go get $mod@$want" >&2
    exit 1
  fi
}
check k8s.io/kubernetes "$KUBE_VERSION"
check go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
check sigs.k8s.io/kwok "$KWOK_VERSION"
(cd codegen && check sigs.k8s.io/controller-tools "$CONTROLLER_TOOLS_VERSION")

# One build at a time per cache folder (parallel `make test` runs share it).
exec 9>"$dir/.lock"
flock 9

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
vpkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $vpkg.gitVersion=$KUBE_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
kwok_ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"

build() { # name package ldflags
  local name=$1 pkg=$2 flags=$3
  if [ -x "$dir/$name" ]; then
    echo "have  $dir/$name"
    return
  fi
  local start=$SECONDS
  go build -trimpath -ldflags "$flags" -o "$dir/.$name.tmp" "$pkg"
  mv "$dir/.$name.tmp" "$dir/$name"
  echo "built $dir/$name ($((SECONDS - start))s)"
}

build etcd ./etcd "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kube_ldflags"
build kubectl k8s.io/kubernetes/cmd/kubectl "$kube_ldflags"
# kubelet runs testenv's real nodes (with containerd, runc and the CNI
# plugins that tools/node-deps.sh installs); fake nodes do not need it.
build kubelet k8s.io/kubernetes/cmd/kubelet "$kube_ldflags"
# kube-proxy routes Service addresses on real nodes (nftables mode).
build kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$kube_ldflags"
build kwok sigs.k8s.io/kwok/cmd/kwok "$kwok_ldflags"
# controller-gen has its own module (tools/codegen), so that its newer
# dependencies do not move the control plane's; the version is in the name
# because the folder name does not carry it.
(cd codegen && build "controller-gen-$CONTROLLER_TOOLS_VERSION" sigs.k8s.io/controller-tools/cmd/controller-gen "-s -w")
# The stage file is cheap to make, so it is made every time and replaced
# only when it changed.
go run ./kwokstages > "$dir/.kwok-stages.yaml.tmp"
if cmp -s "$dir/.kwok-stages.yaml.tmp" "$dir/kwok-stages.yaml"; then
  rm "$dir/.kwok-stages.yaml.tmp"
  echo "have  $dir/kwok-stages.yaml"
else
  mv "$dir/.kwok-stages.yaml.tmp" "$dir/kwok-stages.yaml"
  echo "wrote $dir/kwok-stages.yaml"
fi
echo "assets: $dir"
