#!/usr/bin/env bash
# Runs a command in each Go module named, and fails if it fails in any of
# them, or if a module cannot be loaded at all (a broken go.mod): no module
# is skipped in silence.
#
# Usage: tools/each-module.sh "DIR[:TIMEOUT] ..." COMMAND [ARGS...]
# With a TIMEOUT, "-timeout=TIMEOUT" is appended to the command's
# arguments (for go test). The command runs in each DIR.
set -uo pipefail
modules=$1
shift
failed=()
for m in $modules; do
	dir=${m%%:*}
	args=("$@")
	if [[ $m == *:* ]]; then
		args+=("-timeout=${m#*:}")
	fi
	echo "${args[*]} ($dir)"
	if ! (cd "$dir" && go list -m >/dev/null); then
		echo "each-module: $dir: the module does not load (see above)" >&2
		failed+=("$dir")
		continue
	fi
	if ! (cd "$dir" && "${args[@]}"); then
		failed+=("$dir")
	fi
done
if ((${#failed[@]} > 0)); then
	echo "each-module: failed in: ${failed[*]}" >&2
	exit 1
fi
