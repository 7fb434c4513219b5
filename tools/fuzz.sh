#!/usr/bin/env bash
# tools/fuzz.sh: run every fuzz target of the core module, one at a time
# (make fuzz).
#
# The targets are found with `go test -list 'Fuzz.*'` in every package
# whose test files declare a func Fuzz..., and each is run with
#   go test -run '^$' -fuzz '^Name$' -fuzztime $FUZZTIME -parallel $FUZZPARALLEL
# For each, the executions reached (from go's "fuzz: elapsed: ..., execs: N"
# lines) and the outcome are printed; a summary line ends the run.
#
# A crasher that go finds is written by go to the package's
# testdata/fuzz/FuzzName/ and left there, to be replayed by every later
# `go test` as a regression input (fix the bug, keep the file). The script
# goes on with the other targets and exits 1 at the end if any target
# found a crasher or failed otherwise (a seed corpus entry failing, a
# build error).
#
# Environment:
#   FUZZTIME      time (or Nx executions) per target, as go test -fuzztime (default 2m)
#   FUZZPARALLEL  fuzzing workers per target, as go test -parallel (default 2)
#   FUZZRUN       only the targets whose "importpath.FuzzName" matches this
#                 extended regular expression (default: all)
#   FUZZLOGS      directory for each target's full go test output
#                 (default: a new directory under ${TMPDIR:-/tmp})
#   GO            the go command (default go)
set -uo pipefail

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-2m}
FUZZPARALLEL=${FUZZPARALLEL:-2}
FUZZRUN=${FUZZRUN:-}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
logs=${FUZZLOGS:-$(mktemp -d "${TMPDIR:-/tmp}/loom-fuzz.XXXXXX")}
mkdir -p "$logs" || exit 1

# seconds parses a Go duration made of [0-9.]+(h|m|s|ms|us|ns) terms into
# whole seconds (rounded up); empty for anything else (such as 1000x).
seconds() {
	awk -v d="$1" 'BEGIN {
		s = 0; rest = d
		if (rest == "") exit
		while (rest != "") {
			if (!match(rest, /^[0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns)/)) exit
			term = substr(rest, 1, RLENGTH); rest = substr(rest, RLENGTH + 1)
			match(term, /^[0-9]+(\.[0-9]+)?/); n = substr(term, 1, RLENGTH) + 0; u = substr(term, RLENGTH + 1)
			s += n * (u == "h" ? 3600 : u == "m" ? 60 : u == "s" ? 1 : u == "ms" ? 0.001 : u == "ns" ? 1e-9 : 1e-6)
		}
		printf "%d\n", (s == int(s)) ? s : int(s) + 1
	}'
}

# go test's own timeout (default 10m) would end a long fuzz run: give each
# run its fuzz time and 15 minutes for building, the seed corpus and
# minimizing; an FUZZTIME of executions gets an hour.
if secs=$(seconds "$FUZZTIME") && [[ -n $secs ]]; then
	timeout="$((secs + 900))s"
else
	timeout=60m
fi

# deadlineRace reports whether the go test output in $1 is target $2
# failing with nothing but the bare "context deadline exceeded" that Go
# 1.26's fuzzing coordinator reports when its -fuzztime deadline races
# its workers' shutdown (go.dev/issue/75804): an error of the target
# itself would carry a file:line, and a failing input a "Failing input
# written to" line.
deadlineRace() {
	awk -v name="$2" '
		$0 ~ "^--- FAIL: " name " \\(" { fail = NR; next }
		fail && NR == fail + 1 { msg = $0 }
		fail && NR > fail + 1 && $0 ~ /^[[:space:]]/ { extra = 1 }
		END { exit !(fail && msg ~ /^[[:space:]]+context deadline exceeded$/ && !extra) }
	' "$1"
}

# Packages with a func Fuzz... in their test files: only their test
# binaries are built to list the targets.
mapfile -t candidates < <(
	$GO list -f '{{$d := .Dir}}{{.ImportPath}}{{range .TestGoFiles}} {{$d}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$d}}/{{.}}{{end}}' ./... |
		while read -r pkg files; do
			# shellcheck disable=SC2086 # files is a list of paths without spaces
			[[ -n $files ]] && grep -qE '^func Fuzz' $files && echo "$pkg"
		done
)
if ((${#candidates[@]} == 0)); then
	echo "fuzz: no package declares a fuzz target" >&2
	exit 1
fi

# go test -list prints a package's matching names, then "ok  <pkg> ...".
targets=()
names=()
list=$($GO test -list 'Fuzz.*' "${candidates[@]}" 2>&1)
listrc=$?
while IFS= read -r line; do
	if [[ $line =~ ^Fuzz[^a-z] || $line == Fuzz ]]; then
		names+=("$line")
	elif [[ $line =~ ^ok[[:space:]]+([^[:space:]]+) ]]; then
		pkg=${BASH_REMATCH[1]}
		for n in "${names[@]}"; do
			if [[ -z $FUZZRUN || $pkg.$n =~ $FUZZRUN ]]; then
				targets+=("$pkg $n")
			fi
		done
		names=()
	fi
done <<<"$list"
if ((listrc != 0)); then
	echo "$list" >&2
	echo "fuzz: listing the fuzz targets failed" >&2
	exit 1
fi
if ((${#targets[@]} == 0)); then
	echo "fuzz: no fuzz target matches FUZZRUN=$FUZZRUN" >&2
	exit 1
fi

echo "fuzz: ${#targets[@]} targets, $FUZZTIME each, -parallel $FUZZPARALLEL; logs in $logs"
ok=0 crashed=0 failed=0 raced=0 total=0
problems=()
start=$SECONDS
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	log="$logs/${pkg//\//_}.$name.log"
	dir=$($GO list -f '{{.Dir}}' "$pkg")
	rel=${dir#"$root"/}
	[[ $dir == "$root" ]] && rel=.
	t0=$SECONDS
	$GO test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -parallel "$FUZZPARALLEL" -timeout "$timeout" "$pkg" >"$log" 2>&1
	rc=$?
	took=$((SECONDS - t0))
	execs=$(grep -oE 'fuzz: elapsed: [^,]*, execs: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+$')
	execs=${execs:-0}
	note=
	grep -q 'now fuzzing with' "$log" || note="  (FUZZTIME ended during the corpus's baseline coverage: no new input tried)"
	total=$((total + execs))
	# go writes a crasher to testdata/fuzz/<name>/<hash> of the package
	# and says so; the file stays as a regression input.
	crasher=$(sed -n 's/^[[:space:]]*Failing input written to //p' "$log" | tail -n 1)
	if ((rc == 0)); then
		ok=$((ok + 1))
		printf '  ok       %-48s %-28s %12d execs  %4ds%s\n' "$pkg" "$name" "$execs" "$took" "$note"
	elif [[ -z $crasher ]] && deadlineRace "$log" "$name"; then
		# Go 1.26's coordinator can report its own -fuzztime deadline as
		# the target's failure (go.dev/issue/75804, fixed in Go 1.27):
		# "--- FAIL: FuzzX" with only "context deadline exceeded", no
		# input written. No input failed; the time was fuzzed.
		ok=$((ok + 1))
		raced=$((raced + 1))
		printf '  ok       %-48s %-28s %12d execs  %4ds  (ended by go.dev/issue/75804)\n' "$pkg" "$name" "$execs" "$took"
	elif [[ -n $crasher ]]; then
		crashed=$((crashed + 1))
		[[ $crasher != /* ]] && crasher="$rel/$crasher"
		crasher=${crasher#"$root"/}
		printf '  CRASHER  %-48s %-28s %12d execs  %4ds  %s\n' "$pkg" "$name" "$execs" "$took" "$crasher"
		problems+=("crasher in $pkg $name: $crasher (re-run: cd $rel && $GO test -run '^$name/$(basename "$crasher")\$' .; log $log)")
	else
		failed=$((failed + 1))
		printf '  FAILED   %-48s %-28s %12d execs  %4ds  (exit %d, no crasher written)\n' "$pkg" "$name" "$execs" "$took" "$rc"
		problems+=("failure in $pkg $name without a new input (exit $rc; log $log):")
		problems+=("$(grep -vE '^fuzz: elapsed' "$log" | tail -n 15 | sed 's/^/      /')")
	fi
done

for p in "${problems[@]}"; do
	echo "$p"
done
race=
((raced > 0)) && race=" ($raced ended by go's -fuzztime deadline race, go.dev/issue/75804: no input failed)"
echo "fuzz: ${#targets[@]} targets in $((SECONDS - start))s: $ok ok$race, $crashed with a crasher, $failed failed; $total execs in all"
((crashed == 0 && failed == 0))
