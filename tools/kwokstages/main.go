// Command kwokstages prints the configuration that testenv gives kwok: our
// options (node leases on, a pod CIDR apart from the service range), then
// kwok's own published "fast" stages for nodes (initialise, heartbeat with
// lease) and pods (ready, complete, delete), and one stage of ours derived
// from kwok's pod-complete (see runToCompletion), as one multi-document YAML.
//
// kwok refuses to start without stages. Taking them from the kwok module we
// build keeps them in step with the kwok binary, with nothing copied into
// this repository.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	heartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

// options turns on node leases, as a kubelet has, so that
// kube-controller-manager's node lifecycle controller sees the fake nodes as
// alive, and keeps pod IPs out of the service range testenv gives
// kube-apiserver (10.0.0.0/24), and serves the kubelet API (logs) for the
// fake nodes. kwok does not default the parallelism and handler
// options of a configuration given in a file, so they are set here too.
const options = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.244.0.0/16
  nodeLeaseDurationSeconds: 40
  nodeLeaseParallelism: 4
  nodePlayStageParallelism: 4
  podPlayStageParallelism: 4
  podsOnNodeSyncParallelism: 1
  enableDebuggingHandlers: true`

func main() {
	docs := []string{
		options,
		nodefast.DefaultNodeInit,
		heartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		runToCompletion(),
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		docs[i] = strings.TrimSpace(d)
	}
	if err := check(docs); err != nil {
		fmt.Fprintln(os.Stderr, "kwokstages:", err)
		os.Exit(1)
	}
	if _, err := fmt.Println(strings.Join(docs, "\n---\n")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// kwok's pod-complete stage finishes only the pods of Jobs. A pod of a
// real kubelet whose restartPolicy is Never or OnFailure also finishes,
// when its command exits; operators that run a command in a bare Pod (such
// as the At example) need that too. runToCompletion is kwok's stage with
// the Job clause replaced by one on the restart policy, and a one-second
// delay, so that the Running phase can be seen before Succeeded. A Job's
// pod matches both stages; both give it the same status.
func runToCompletion() string {
	s := podfast.DefaultPodComplete
	for _, r := range [][2]string{
		{"name: pod-complete\n", "name: pod-run-to-completion\n"},
		{"    - key: '.metadata.ownerReferences.[].kind'\n      operator: 'In'\n      values:\n      - 'Job'\n",
			"    - key: '.spec.restartPolicy'\n      operator: 'In'\n      values:\n      - 'Never'\n      - 'OnFailure'\n"},
		{"  next:\n", "  delay:\n    durationMilliseconds: 1000\n  next:\n"},
	} {
		if strings.Count(s, r[0]) != 1 {
			return "" // caught by check: kwok's stage changed shape
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return s
}

func check(docs []string) error {
	for i, d := range docs {
		if d == "" {
			return fmt.Errorf("document %d is empty: kwok's pod-complete stage no longer has the shape runToCompletion edits", i+1)
		}
	}
	return nil
}
