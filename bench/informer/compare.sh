#!/usr/bin/env bash
# Runs the informer memory/sync measurement (main.go) for Loom and client-go
# in alternation, each run in its own process, ROUNDS times (default 5), in
# list and WatchList mode, without a transform and with managedFields
# stripped; prints the median and range of each metric and the Loom/client-go
# ratio of the medians (lower is better for Loom).
# Usage: bench/informer/compare.sh [ROUNDS]
# Env: LOOM_BENCH_PODS (10000), LOOM_BENCH_EVENTS (1000),
#      LOOM_BENCH_MODES ("list watchlist"), LOOM_BENCH_OUT (raw lines file),
#      LOOM_BENCH_TEMPLATES (50: workloads the Pods are replicas of; 2500
#        gives 4 replicas each, 10000 one Pod per workload),
#      LOOM_BENCH_FLAGS (extra run flags, such as -json, -dynamic for
#        the Widget corpus, or -hold-events to measure the recorded watch
#        events apart from the sync),
#      LOOM_BENCH_KIND (pods; widgets records the custom resource corpus,
#        served as JSON only; in live mode, small Widgets of about 1 KB,
#        for which set LOOM_BENCH_WIRES=-json=true),
#      LOOM_BENCH_LIVE (1: live mode; a kube-apiserver started here with
#        testenv holds the Pods, no corpus is recorded, and each mode runs
#        on JSON and on protobuf; no watch events or relist are measured),
#      LOOM_BENCH_WIRES (live mode: "-json=true -json=false"),
#      LOOM_BENCH_STRIPS ("false true": managedFields kept, then stripped).
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
pods=${LOOM_BENCH_PODS:-10000}
events=${LOOM_BENCH_EVENTS:-1000}
modes=${LOOM_BENCH_MODES:-list watchlist}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/informer
go build -o "$bin" .
if [[ -n "${LOOM_BENCH_LIVE:-}" ]]; then
	coproc ENV { "$bin" -env -pods "$pods" -templates "${LOOM_BENCH_TEMPLATES:-50}" -kind "${LOOM_BENCH_KIND:-pods}"; }
	envpid=$ENV_PID
	trap 'kill $envpid 2>/dev/null; wait $envpid 2>/dev/null || true; rm -rf "$tmp"' EXIT
	read -r line <&"${ENV[0]}"
	source=(-kubeconfig "${line#kubeconfig=}" -pods "$pods" -kind "${LOOM_BENCH_KIND:-pods}")
	wires=${LOOM_BENCH_WIRES:--json=true -json=false}
	events=0
else
	source=(-corpus "$tmp/corpus")
	wires=""
	"$bin" -record "$tmp/corpus" -pods "$pods" -events "$events" -templates "${LOOM_BENCH_TEMPLATES:-50}" -kind "${LOOM_BENCH_KIND:-pods}"
fi
out=${LOOM_BENCH_OUT:-$tmp/raw}
: >"$out"
for r in $(seq "$rounds"); do
	order="loom client-go"
	if ((r % 2 == 0)); then order="client-go loom"; fi
	for mode in $modes; do
		flag=""
		if [[ $mode == watchlist ]]; then flag=-watchlist; fi
		for wire in ${wires:-none}; do
			[[ $wire == none ]] && wire=""
			for strip in ${LOOM_BENCH_STRIPS:-false true}; do
				for impl in $order; do
					"$bin" "${source[@]}" -impl "$impl" -strip="$strip" $flag $wire ${LOOM_BENCH_FLAGS:-} 2>/dev/null >>"$out"
				done
			done
		done
	done
done
awk '
{
	delete kv
	for (i = 1; i <= NF; i++) { split($i, p, "="); kv[p[1]] = p[2] }
	g = kv["mode"] " strip=" kv["strip"]; groups[g] = 1
	for (k in kv) if (k ~ /_(ms|B|MB)$/ || k == "gc_sync") { vals[g SUBSEP kv["impl"] SUBSEP k] = vals[g SUBSEP kv["impl"] SUBSEP k] " " kv[k]; metrics[k] = 1 }
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
	for (g in groups) for (m in metrics) {
		l = vals[g SUBSEP "loom" SUBSEP m]; c = vals[g SUBSEP "client-go" SUBSEP m]
		if (l == "" || c == "") continue
		ml = median(l); mc = median(c)
		printf "%-20s %-22s loom %9s (%s)  client-go %9s (%s)  loom/client-go %s\n", g, m, ml, spread(l), mc, spread(c), (mc + 0 > 0 ? sprintf("%.3f", ml / mc) : "-")
	}
}' "$out" | sort
echo "rounds=$rounds pods=$pods events=$events templates=${LOOM_BENCH_TEMPLATES:-50} flags=${LOOM_BENCH_FLAGS:-none} $(nproc) cores, $(go version | cut -d' ' -f3)"
