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
#      LOOM_BENCH_IMPLS (default: loom controller-runtime controller-runtime-nocopy;
#        also loom-trace, loom-trace-noexport; loom-base: Loom built
#        from the commit LOOM_BENCH_BASE, to measure a change of Loom's own;
#        and watch-floor: a list and a watch with Loom's client and no
#        framework, the least any controller spends per event).
# The summary compares the first implementation with each of the others:
# the ratio of their medians, and the median of the ratios within each
# round ("paired").
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-3}
n=${LOOM_BENCH_OBJECTS:-10000}
rate=${LOOM_BENCH_RATE:-300}
dur=${LOOM_BENCH_DURATION:-20s}
tmp=$(mktemp -d)
bin=$tmp/controller
go build -o "$bin" .
if [[ -n "${LOOM_BENCH_BASE:-}" ]]; then
	# The same benchmark, with Loom as it was at LOOM_BENCH_BASE.
	git worktree add -q --detach "$tmp/base" "$LOOM_BENCH_BASE"
	(cd "$tmp/base/bench/controller" && go build -o "$tmp/controller-base" .)
	git worktree remove --force "$tmp/base"
fi
coproc ENV { "$bin" -mode env -n "$n"; }
envpid=$ENV_PID
trap 'kill $envpid 2>/dev/null; wait $envpid 2>/dev/null || true; rm -rf "$tmp"' EXIT
read -r line <&"${ENV[0]}"
kubeconfig=${line#kubeconfig=}
kubeconfig=${kubeconfig%% *}
otlp=${line##*otlp=}
out=${LOOM_BENCH_OUT:-$tmp/raw}
: >"$out"
read -r -a impls <<<"${LOOM_BENCH_IMPLS:-loom controller-runtime controller-runtime-nocopy}"
for r in $(seq "$rounds"); do
	order=()
	for i in "${!impls[@]}"; do order+=("${impls[(i + r - 1) % ${#impls[@]}]}"); done
	for impl in "${order[@]}"; do
		if [[ $impl == loom-base ]]; then
			"$tmp/controller-base" -mode run -impl loom -kubeconfig "$kubeconfig" -n "$n" -rate "$rate" -duration "$dur" ${LOOM_BENCH_FLAGS:-} 2>/dev/null |
				sed 's/^impl=loom /impl=loom-base /' | tee -a "$out"
		else
			"$bin" -mode run -impl "$impl" -kubeconfig "$kubeconfig" -otlp "$otlp" -n "$n" -rate "$rate" -duration "$dur" ${LOOM_BENCH_FLAGS:-} 2>/dev/null | tee -a "$out"
		fi
	done
done
awk -v impls="${impls[*]}" '
BEGIN { ni = split(impls, im, " ") }
{
	delete kv
	for (i = 1; i <= NF; i++) { split($i, p, "="); kv[p[1]] = p[2] }
	r = int((NR - 1) / ni) + 1 # each round prints one line per implementation
	for (k in kv) if (k != "impl" && k != "owned") { vals[kv["impl"] SUBSEP k] = vals[kv["impl"] SUBSEP k] " " kv[k]; metrics[k] = 1; byRound[kv["impl"] SUBSEP k SUBSEP r] = kv[k] }
	if (r > nr) nr = r
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
	first = im[1]
	for (m in metrics) {
		l = vals[first SUBSEP m]
		if (l == "") continue
		ml = median(l); line = sprintf("%-24s %s %9s (%s)", m, first, ml, spread(l))
		for (i = 2; i <= ni; i++) {
			o = vals[im[i] SUBSEP m]
			if (o == "") continue
			mo = median(o)
			line = line sprintf("  %s %9s (%s) %s/%s %s", im[i], mo, spread(o), first, im[i], (mo + 0 > 0 ? sprintf("%.3f", ml / mo) : "-"))
			# The same ratio taken within each round, then the median: the
			# two runs of a round are minutes apart, so drift cancels.
			pr = ""
			for (r = 1; r <= nr; r++) {
				a = byRound[first SUBSEP m SUBSEP r]; b = byRound[im[i] SUBSEP m SUBSEP r]
				if (a != "" && b + 0 > 0) pr = pr " " (a / b)
			}
			if (pr != "") line = line sprintf(" paired %.3f (%s)", median(pr), spread(pr))
		}
		print line
	}
}' "$out" | sort
echo "rounds=$rounds flags=${LOOM_BENCH_FLAGS:-none} objects=$n rate=$rate/s duration=$dur $(nproc) cores, $(go version | cut -d' ' -f3)"
