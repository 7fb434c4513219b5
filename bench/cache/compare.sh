#!/usr/bin/env bash
# compare.sh [ROUNDS] [BENCH]: runs the benchmarks BENCH (a regexp of
# top-level names: SelectorList by default; also Write, GetByKey) of this
# package for client-go and Loom in separate processes, alternating,
# ROUNDS times (default 5), and prints per case the median ns/op with the
# range, the allocations, and the ratio Loom time ÷ client-go time.
set -euo pipefail
rounds=${1:-5}
bench=${2:-SelectorList}
dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$dir/.." && go test -c -o "$tmp/cache.test" ./cache)
for ((r = 1; r <= rounds; r++)); do
	for impl in client-go loom; do
		"$tmp/cache.test" -test.run '^$' -test.bench "^Benchmark($bench)\$/.*/$impl\$" -test.benchmem -test.count 1 |
			grep '^Benchmark' >>"$tmp/results.txt"
	done
done
awk '
{
	split($1, p, "/"); c = p[2]; impl = p[3]; sub(/^Benchmark/, "", p[1]); c = p[1] "/" c; sub(/-[0-9]+$/, "", impl)
	k = c SUBSEP impl; n[k]++; v[k, n[k]] = $3
	for (i = 4; i <= NF; i++) { if ($(i+1) == "B/op") b[k] = $i; if ($(i+1) == "allocs/op") a[k] = $i; if ($(i+1) == "pods/op") m[c] = $i }
	if (!(c in seen)) { seen[c] = 1; order[++nc] = c }
}
function median(k,   i, j, t, arr, cnt) {
	cnt = n[k]; for (i = 1; i <= cnt; i++) arr[i] = v[k, i]
	for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
	lo[k] = arr[1]; hi[k] = arr[cnt]
	return cnt % 2 ? arr[(cnt + 1) / 2] : (arr[cnt / 2] + arr[cnt / 2 + 1]) / 2
}
END {
	printf "| case | pods | client-go ns/op (range) | Loom ns/op (range) | Loom ÷ client-go | client-go B/op, allocs | Loom B/op, allocs |\n|---|---|---|---|---|---|---|\n"
	for (i = 1; i <= nc; i++) {
		c = order[i]; kc = c SUBSEP "client-go"; kl = c SUBSEP "loom"
		mc = median(kc); ml = median(kl)
		printf "| %s | %s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | %.4f× | %s B, %s | %s B, %s |\n", c, m[c], mc, lo[kc], hi[kc], ml, lo[kl], hi[kl], ml / mc, b[kc], a[kc], b[kl], a[kl]
	}
}' "$tmp/results.txt"
