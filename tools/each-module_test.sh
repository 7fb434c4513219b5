#!/usr/bin/env bash
# Checks tools/each-module.sh, as make test runs it: a module whose go.mod
# is broken must fail the run, not be skipped; a good module passes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/good" "$tmp/broken"
printf 'module example.com/good\n\ngo 1.22\n' >"$tmp/good/go.mod"
printf 'package good\n' >"$tmp/good/good.go"
printf 'module example.com/broken\n\ngo 1.22\n\nrequire this is not a go.mod\n' >"$tmp/broken/go.mod"
printf 'package broken\n' >"$tmp/broken/broken.go"
if ! bash "$here/each-module.sh" "$tmp/good" go vet ./... >"$tmp/out" 2>&1; then
	cat "$tmp/out"
	echo "each-module_test: a good module failed" >&2
	exit 1
fi
if bash "$here/each-module.sh" "$tmp/good $tmp/broken" go vet ./... >"$tmp/out" 2>&1; then
	cat "$tmp/out"
	echo "each-module_test: a module with a broken go.mod did not fail the run" >&2
	exit 1
fi
grep -q "failed in: $tmp/broken" "$tmp/out" || { cat "$tmp/out"; echo "each-module_test: the failure does not name the broken module" >&2; exit 1; }
echo "each-module_test: ok"
