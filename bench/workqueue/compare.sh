#!/usr/bin/env bash
# Runs the workqueue benchmarks for Loom and client-go (which has no
# priorities) in alternation, each in its own process, ROUNDS times
# (default 5), and prints the median of each metric and the client-go/Loom
# ratio of each Loom variant (higher is better for Loom). The Loom variants
# are "loom" (no priorities), "loom-priority" (keys split between two
# priorities) and, for Contended only, "loom-lowbacklog" (the backlog at
# low priority, the adds while it drains at normal priority).
# Usage: bench/workqueue/compare.sh [ROUNDS]
# LOOM_BENCH_RAW=FILE also writes the raw go test -bench lines to FILE.
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
n=${LOOM_BENCH_N:-2000000}
bin=$(mktemp -d)/wq.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" .
out="$(dirname "$bin")/raw.txt"
for _ in $(seq "$rounds"); do
	for b in AddGetDone AddGetDoneBatch Contended AddAfter; do
		impls="loom loom-priority client-go"
		if [ "$b" = Contended ]; then
			impls="loom loom-priority loom-lowbacklog client-go"
		fi
		for impl in $impls; do
			"$bin" -test.run '^$' -test.bench "^Benchmark$b\$/^$impl\$" -test.benchtime "${n}x" -test.benchmem |
				grep '^Benchmark' >>"$out"
		done
	done
done
if [ -n "${LOOM_BENCH_RAW:-}" ]; then
	cp "$out" "$LOOM_BENCH_RAW"
fi
# Lines look like: BenchmarkX/impl-2 N V ns/op [V unit]... ; print the
# median of every unit per benchmark, then the ratios.
awk '
{
	split($1, p, "/"); b = p[1]; sub(/^Benchmark/, "", b); impl = p[2]; sub(/-[0-9]+$/, "", impl)
	for (i = 3; i < NF; i += 2) { k = b SUBSEP impl SUBSEP $(i+1); vals[k] = vals[k] " " $i; units[$(i+1)] = 1 }
	bs[b] = 1
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
	for (b in bs) {
		for (u in units) {
			split("loom loom-priority loom-lowbacklog", variants, " ")
			for (k = 1; k <= 3; k++) {
				impl = variants[k]
				l = vals[b SUBSEP impl SUBSEP u]; c = vals[b SUBSEP "client-go" SUBSEP u]
				if (l == "" || c == "") continue
				ml = median(l); mc = median(c)
				r = (u ~ /^ns\// && ml + 0 > 0) ? sprintf("%.2fx", mc / ml) : "-"
				printf "%-16s %-10s %-13s %10s (%s)  client-go %10s (%s)  ratio %s\n", b, u, impl, ml, spread(l), mc, spread(c), r
			}
		}
	}
}' "$out" | sort
echo "rounds=$rounds n=$n keys=${LOOM_BENCH_KEYS:-1000000} $(nproc) cores, $(go version | cut -d' ' -f3)"
