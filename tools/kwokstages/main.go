// Command kwokstages prints the configuration that testenv gives kwok: our
// options (node leases on, a pod CIDR apart from the service range), then
// kwok's own published "fast" stages for nodes (initialise, heartbeat with
// lease) and pods (ready, complete, delete), as one multi-document YAML.
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
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		docs[i] = strings.TrimSpace(d)
	}
	if _, err := fmt.Println(strings.Join(docs, "\n---\n")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
