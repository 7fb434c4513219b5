#!/usr/bin/env bash
# The At demo that `make demo` runs: a local cluster, the At operator in its
# own process (as it runs in a cluster), an At followed from PENDING to DONE,
# then `loom get ats -o wide`, whose v1beta1 view the API server converts by
# calling the operator's webhook. The operator is stopped only after that
# read. Everything started here is stopped on exit, whatever happens.
#
# Usage: examples/at/demo.sh BIN_DIR   (BIN_DIR holds loom and at-example)
set -euo pipefail
bin=$(cd "$1" && pwd)
state=$(mktemp -d)
kc=$state/kubeconfig
up='' op='' demo=''
cleanup() {
	for pid in $demo $op; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
	"$bin/loom" dev down --state-dir "$state" >/dev/null 2>&1 || true
	[ -z "$up" ] || wait "$up" 2>/dev/null || true
	rm -rf "$state"
}
trap cleanup EXIT

operator_failed() {
	echo "at: $1; the operator's last log lines:" >&2
	tail -n 20 "$state/operator.log" >&2
	exit 1
}

echo '$ loom dev up --with-controllers --nodes 1'
"$bin/loom" dev up --with-controllers --nodes 1 --state-dir "$state" >"$state/dev.log" 2>&1 &
up=$!
"$bin/loom" dev status --state-dir "$state" --wait 3m

echo
echo '$ at --install-crds --webhooks --webhook-local &   # the operator, in its own process'
"$bin/at-example" --kubeconfig "$kc" --install-crds --webhooks --webhook-local \
	--webhook-addr 127.0.0.1:0 --cert-dir "$state/certs" 2>"$state/operator.log" &
op=$!

echo
echo '$ at demo   # create an At due in 5s and follow it until DONE'
"$bin/at-example" demo --kubeconfig "$kc" --in 5s &
demo=$!
# Should the operator stop first, say so at once instead of letting the
# demo wait out its timeout.
while kill -0 "$demo" 2>/dev/null; do
	kill -0 "$op" 2>/dev/null || operator_failed "the operator stopped"
	sleep 0.2
done
status=0
wait "$demo" || status=$?
demo=''
[ "$status" = 0 ] || operator_failed "the demo failed"

echo
echo '$ loom get ats -o wide'
"$bin/loom" get ats -o wide --kubeconfig "$kc"

echo
echo '$ kill %1   # stop the operator'
kill -TERM "$op"
status=0
wait "$op" || status=$?
op=''
[ "$status" = 0 ] || operator_failed "the operator exited with status $status"

echo
echo '$ loom dev down'
"$bin/loom" dev down --state-dir "$state"
