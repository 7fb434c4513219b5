#!/usr/bin/env bash
# Runs the event → reconcile measurement (main.go) for Loom,
# controller-runtime and controller-runtime with UnsafeDisableDeepCopy, in
# rotating order, each run in its own process, ROUNDS times (default 3),
# against one control plane (testenv) holding N ConfigMaps; prints the
# median and range of each metric and Loom's ratio to each of the others'
# medians.
# Usage: bench/controller/compare.sh [ROUNDS]
# Env: LOOM_BENCH_OBJECTS (10000), LOOM_BENCH_RATE (300 updates/s),
#      LOOM_BENCH_DURATION (20s), LOOM_BENCH_OUT (raw lines file),
#      LOOM_BENCH_FLAGS (extra run flags, such as -arrival or -owned),
#      LOOM_BENCH_IMPLS (default: loom controller-runtime controller-runtime-nocopy).
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-3}
n=${LOOM_BENCH_OBJECTS:-10000}
rate=${LOOM_BENCH_RATE:-300}
dur=${LOOM_BENCH_DURATION:-20s}
tmp=$(mktemp -d)
bin=$tmp/controller
go build -o "$bin" .
coproc ENV { "$bin" -mode env -n "$n"; }
envpid=$ENV_PID
trap 'kill $envpid 2>/dev/null; wait $envpid 2>/dev/null; rm -rf "$tmp"' EXIT
read -r line <&"${ENV[0]}"
kubeconfig=${line#kubeconfig=}
out=${LOOM_BENCH_OUT:-$tmp/raw}
: >"$out"
read -r -a impls <<<"${LOOM_BENCH_IMPLS:-loom controller-runtime controller-runtime-nocopy}"
for r in $(seq "$rounds"); do
	order=()
	for i in "${!impls[@]}"; do order+=("${impls[(i + r - 1) % ${#impls[@]}]}"); done
	for impl in "${order[@]}"; do
		"$bin" -mode run -impl "$impl" -kubeconfig "$kubeconfig" -n "$n" -rate "$rate" -duration "$dur" ${LOOM_BENCH_FLAGS:-} 2>/dev/null | tee -a "$out"
	done
done
awk '
{
	delete kv
	for (i = 1; i <= NF; i++) { split($i, p, "="); kv[p[1]] = p[2] }
	for (k in kv) if (k != "impl" && k != "owned") { vals[kv["impl"] SUBSEP k] = vals[kv["impl"] SUBSEP k] " " kv[k]; metrics[k] = 1 }
}
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function spread(s,   a, n, i, lo, hi) {
	n = split(s, a, " "); lo = hi = a[1]
	for (i = 2; i <= n; i++) { if (a[i] + 0 < lo + 0) lo = a[i]; if (a[i] + 0 > hi + 0) hi = a[i] }
	return lo "-" hi
}
END {
	for (m in metrics) {
		l = vals["loom" SUBSEP m]; c = vals["controller-runtime" SUBSEP m]; u = vals["controller-runtime-nocopy" SUBSEP m]
		if (l == "" || (c == "" && u == "")) continue
		ml = median(l); line = sprintf("%-24s loom %9s (%s)", m, ml, spread(l))
		if (c != "") { mc = median(c); line = line sprintf("  cr %9s (%s) loom/cr %s", mc, spread(c), (mc + 0 > 0 ? sprintf("%.3f", ml / mc) : "-")) }
		if (u != "") { mu = median(u); line = line sprintf("  cr-nocopy %9s (%s) loom/cr-nocopy %s", mu, spread(u), (mu + 0 > 0 ? sprintf("%.3f", ml / mu) : "-")) }
		print line
	}
}' "$out" | sort
echo "rounds=$rounds flags=${LOOM_BENCH_FLAGS:-none} objects=$n rate=$rate/s duration=$dur $(nproc) cores, $(go version | cut -d' ' -f3)"
