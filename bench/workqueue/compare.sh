#!/usr/bin/env bash
# Runs the workqueue benchmarks for Loom and client-go in alternation, each
# in its own process, ROUNDS times (default 5), and prints the median of
# each metric and the client-go/Loom ratio (higher is better for Loom).
# Usage: bench/workqueue/compare.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
n=${LOOM_BENCH_N:-2000000}
bin=$(mktemp -d)/wq.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" .
out=$(mktemp)
for _ in $(seq "$rounds"); do
	for b in AddGetDone AddGetDoneBatch Contended AddAfter; do
		for impl in loom client-go; do
			"$bin" -test.run '^$' -test.bench "^Benchmark$b\$/^$impl\$" -test.benchtime "${n}x" -test.benchmem |
				grep '^Benchmark' >>"$out"
		done
	done
done
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
			l = vals[b SUBSEP "loom" SUBSEP u]; c = vals[b SUBSEP "client-go" SUBSEP u]
			if (l == "" || c == "") continue
			ml = median(l); mc = median(c)
			r = (u ~ /^ns\// && ml + 0 > 0) ? sprintf("%.2fx", mc / ml) : "-"
			printf "%-16s %-10s loom %10s (%s)  client-go %10s (%s)  ratio %s\n", b, u, ml, spread(l), mc, spread(c), r
		}
	}
}' "$out" | sort
echo "rounds=$rounds n=$n keys=${LOOM_BENCH_KEYS:-1000000} $(nproc) cores, $(go version | cut -d' ' -f3)"
