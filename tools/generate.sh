#!/usr/bin/env bash
# Runs the code generators over the example operators (make generate):
# controller-gen writes each API package's deep-copy methods
# (zz_generated.deepcopy.go), each operator's CRD manifests
# (config/crd) and its RBAC role from the +kubebuilder:rbac markers
# (config/rbac/role.yaml, roleName <operator>-operator), and the webhook
# configurations from +kubebuilder:webhook markers (config/webhook).
#
# With --check, it fails when that changed any file: the generated files in
# the tree were out of date (CI runs this through make test).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=../testenv/versions.env
source "$root/testenv/versions.env"
dir=${LOOM_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/loom/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}/bin}
gen="$dir/controller-gen-$CONTROLLER_TOOLS_VERSION"
[ -x "$gen" ] || { echo "generate: $gen is missing; run make assets" >&2; exit 1; }

cd "$root"
generated() { # every file the generators write, with its hash
  find examples -path '*/config/crd/*.yaml' -o -path '*/config/rbac/role.yaml' -o -path '*/config/webhook/manifests.yaml' \
    -o -name 'zz_generated.*.go' | sort | xargs -r sha256sum
}
before=$(generated)

# Each operator is a folder under examples/ with a config/rbac folder.
for cfg in examples/*/config/rbac; do
  op=$(basename "$(dirname "$(dirname "$cfg")")")
  if [ -d "examples/$op/api" ]; then
    rm -f examples/"$op"/config/crd/*.yaml
    "$gen" object paths="./examples/$op/api/..."
    "$gen" crd paths="./examples/$op/api/..." output:crd:artifacts:config="examples/$op/config/crd"
  fi
  "$gen" rbac:roleName="$op-operator" paths="./examples/$op/..." output:rbac:artifacts:config="examples/$op/config/rbac"
  if grep -rqs '+kubebuilder:webhook:' "examples/$op" --include='*.go'; then
    "$gen" webhook paths="./examples/$op/..." output:webhook:artifacts:config="examples/$op/config/webhook"
  fi
done

# The aggregated API server example is its own module; only its deep-copy
# methods are generated.
(cd examples/custom-apiserver && "$gen" object paths=./apis/...)

after=$(generated)
if [ "${1:-}" = --check ] && [ "$before" != "$after" ]; then
  echo "generate: the generated files were out of date; make generate changed:" >&2
  diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
  exit 1
fi
