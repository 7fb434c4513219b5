package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/shard"
)

// QuietWebhook measures what the webhooks add to a create with nothing
// else running: a fresh control plane, one sharded replica (which serves
// the assignment and no-op webhooks, and reconciles each probe), no
// workload, and opts.Shelves Shelves made and reconciled beforehand. The
// scenario's probes measure the same under the load of three replicas
// and the workload's updates; this tells the webhooks' own cost from what
// that load adds, and, run with few and with many Shelves, whether the
// cost depends on how many objects there are. It makes opts.ProbeCreates
// creates in each probe mode, as the scenario does with its updates
// paused.
func QuietWebhook(ctx context.Context, opts Options) ([]ProbeReport, error) {
	return onFreshPlane(ctx, opts, (*run).quietProbe)
}

// quietProbe is QuietWebhook on a run that is set up.
func (r *run) quietProbe(ctx context.Context) ([]ProbeReport, error) {
	// The configuration comes first: the replica injects its address and
	// CA into it when it starts.
	if err := r.installWebhookConfig(ctx); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := r.start("r1"); err != nil {
		return nil, err
	}
	ring := shard.NewRing([]string{"r1"}, shard.RingOptions{})
	if _, _, err := r.settle(ctx, ring, t0, 5*time.Minute); err != nil {
		return nil, err
	}
	if _, err := r.caughtUp(ctx, ring, t0, 5*time.Minute); err != nil {
		return nil, err
	}
	if err := r.webhooksAnswer(ctx, time.Minute); err != nil {
		return nil, err
	}
	fmt.Fprintf(r.opts.Out, "one replica, %d Shelves reconciled, no workload (%.1f s to get there)\n", r.opts.Shelves, time.Since(t0).Seconds())
	return r.probe(ctx, r.opts.ProbeCreates, true)
}

// webhooksAnswer creates a Shelf in each probe mode that calls a webhook
// until the API server reports a call to each of them, then removes those
// Shelves: a configuration reaches the API server's admission a moment
// after it is written, and the replica injects its CA after it starts.
func (r *run) webhooksAnswer(ctx context.Context, bound time.Duration) error {
	var names []string
	defer func() { _ = r.removeProbes(ctx, names) }()
	for i, deadline := 0, time.Now().Add(bound); ; i++ {
		calls, err := r.webhookCalls(ctx)
		if err != nil {
			return err
		}
		missing := ""
		for _, mode := range probeModes[1:] {
			if calls[mode].n == 0 {
				missing = mode
				name := fmt.Sprintf("warm-%s-%d", mode, i)
				if _, err := r.shelves.Create(ctx, probeShelf(name, mode), metav1.CreateOptions{}); err != nil {
					return err
				}
				names = append(names, name)
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server did not call the %s webhook within %s", missing, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
