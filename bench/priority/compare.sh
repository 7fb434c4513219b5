#!/usr/bin/env bash
# Runs the backlog-priority measurement (main.go) for Loom, Loom without
# priorities and controller-runtime, in rotating order, each run in its own
# process, ROUNDS times (default 5), against one control plane holding N
# ConfigMaps; prints the median and range of each metric, and Loom's ratio
# to the others' medians (lower is better for Loom).
# Usage: bench/priority/compare.sh [ROUNDS]
# Env: LOOM_BENCH_OBJECTS (10000), LOOM_BENCH_WORK (1ms per reconcile),
#      LOOM_BENCH_EVERY (100ms between changes), LOOM_BENCH_OUT (raw lines).
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
n=${LOOM_BENCH_OBJECTS:-10000}
work=${LOOM_BENCH_WORK:-1ms}
every=${LOOM_BENCH_EVERY:-100ms}
tmp=$(mktemp -d)
bin=$tmp/priority
go build -o "$bin" .
coproc ENV { "$bin" -mode env -n "$n"; }
envpid=$ENV_PID
trap 'kill $envpid 2>/dev/null; wait $envpid 2>/dev/null || true; rm -rf "$tmp"' EXIT
read -r line <&"${ENV[0]}"
kubeconfig=${line#kubeconfig=}
out=${LOOM_BENCH_OUT:-$tmp/raw}
: >"$out"
impls=(loom loom-fifo controller-runtime)
for r in $(seq "$rounds"); do
	for k in 0 1 2; do
		impl=${impls[$(((k + r) % 3))]}
		"$bin" -mode run -impl "$impl" -kubeconfig "$kubeconfig" -n "$n" -work "$work" -every "$every" | tee -a "$out"
	done
done
python3 - "$out" <<'PY'
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split())
    runs[kv["impl"]].append(kv)
print(f"\n{len(runs['loom'])} rounds; median (min-max); ratio = loom / other (lower is better for Loom)")
for metric in ["p50_ms", "p99_ms", "max_ms", "drain_s", "changes"]:
    med = {}
    for impl, rs in runs.items():
        v = sorted(float(r[metric]) for r in rs)
        med[impl] = statistics.median(v)
        print(f"{metric:8} {impl:20} {med[impl]:10.3f} ({v[0]:.3f}-{v[-1]:.3f})")
    for other in ["loom-fifo", "controller-runtime"]:
        if metric != "changes" and med.get(other):
            print(f"{metric:8} loom / {other:18} {med['loom'] / med[other]:.3f}x")
p99 = statistics.median(sorted(float(r["p99_ms"]) for r in runs["loom"]))
drain = statistics.median(sorted(float(r["drain_s"]) for r in runs["loom"]))
print(f"loom p99 / loom drain time: {p99 / 1000 / drain:.4f}")
PY
