#!/usr/bin/env bash
# Runs the referenced-only cache measurement (main.go) for Loom, client-go
# and controller-runtime (metadata watch + GET) in alternation, each run in
# its own process, ROUNDS times (default 5), against one control plane
# that this script starts and fills; prints medians, ranges and ratios.
# Usage: bench/refcache/compare.sh [ROUNDS]
# Env: LOOM_BENCH_SECRETS (10000), LOOM_BENCH_SIZE (51200 bytes),
#      LOOM_BENCH_NAMESPACES (100),
#      LOOM_BENCH_IMPLS ("loom loom-strip loom-meta-get client-go cr-meta"),
#      LOOM_BENCH_OUT (raw lines file).
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
flags=(-secrets "${LOOM_BENCH_SECRETS:-10000}" -size "${LOOM_BENCH_SIZE:-51200}" -namespaces "${LOOM_BENCH_NAMESPACES:-100}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/refcache
go build -o "$bin" .
coproc ENV { "$bin" -env "${flags[@]}"; }
envpid=$ENV_PID
trap 'kill $envpid 2>/dev/null; wait $envpid 2>/dev/null || true; rm -rf "$tmp"' EXIT
read -r line <&"${ENV[0]}"
kubeconfig=${line#kubeconfig=}
out=${LOOM_BENCH_OUT:-$tmp/raw}
: >"$out"
impls=(${LOOM_BENCH_IMPLS:-loom loom-strip loom-meta-get client-go cr-meta})
for r in $(seq "$rounds"); do
	# Rotate the order each round.
	for k in $(seq 0 $((${#impls[@]} - 1))); do
		impl=${impls[$(((k + r) % ${#impls[@]}))]}
		"$bin" -kubeconfig "$kubeconfig" -impl "$impl" "${flags[@]}" 2>/dev/null | tee -a "$out"
	done
done
"$bin" -summarize "$out"
