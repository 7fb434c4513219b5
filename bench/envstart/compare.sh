#!/usr/bin/env bash
# Starts a control plane with Loom's testenv and with controller-runtime's
# envtest (the same etcd and kube-apiserver binaries, testenv's assets
# folder), in alternation, ROUNDS times each (default 5); each start runs
# 20 tests that make a namespace, a client and a ConfigMap, then stops.
# The first round of each is cold: the page cache is dropped before it
# when this runs as root. Prints each run's line, then the medians of the
# warm rounds and Loom ÷ envtest (lower is better for Loom).
# Usage: bench/envstart/compare.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
bin=$(mktemp -d)/envstart.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" .
out="$(dirname "$bin")/runs.txt"
drop() {
	if [ -w /proc/sys/vm/drop_caches ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches
	fi
}
for impl in loom envtest; do
	drop
	LOOM_BENCH_IMPL=$impl "$bin" -test.run '^TestStartAndPerTest$' | grep '^impl=' | sed 's/^/cold /' | tee -a "$out"
done
for _ in $(seq "$rounds"); do
	for impl in loom envtest; do
		LOOM_BENCH_IMPL=$impl "$bin" -test.run '^TestStartAndPerTest$' | grep '^impl=' | sed 's/^/warm /' | tee -a "$out"
	done
done
awk '
$1 == "warm" {
	split($2, a, "="); impl = a[2]
	for (i = 3; i <= NF; i++) { split($i, kv, "="); v[impl, kv[1]] = v[impl, kv[1]] " " kv[2]; keys[kv[1]] = 1 }
}
function med(s,   n, x, i, j, t) {
	n = split(s, x, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
	return x[int((n + 1) / 2)]
}
END {
	for (k in keys) {
		l = med(v["loom", k]); e = med(v["envtest", k])
		printf "warm median %-14s loom %8.2f  envtest %8.2f  ratio %.2fx\n", k, l, e, (e > 0 ? l / e : 0)
	}
}' "$out" | sort
echo "rounds=$rounds $(nproc) cores, $(go env GOVERSION)"
