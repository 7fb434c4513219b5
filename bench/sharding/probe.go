package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/shard"
)

// The two ways new objects get their shard: the leader's watch of
// unassigned objects, and the assignment webhook. The probe creates Shelves
// one at a time in each mode, in alternating batches, and measures the
// create's latency and the time until the Shelf carries its shard label
// (0 when the create's response has it). Each create waits for the
// reconcile of the one before. A third mode calls a webhook
// that changes nothing, for what any webhook adds.

// ProbeReport is one mode's figures.
type ProbeReport struct {
	Mode                     string
	Quiet                    bool // the workload's updates were paused
	Creates                  int
	LabelledAtCreate         int
	CreateP50, CreateP99     time.Duration
	LabelledP50, LabelledP99 time.Duration
	// WebhookCalls and WebhookMean are the API server's own count and mean
	// duration of its calls to the mode's webhook during this mode's
	// creates (apiserver_admission_webhook_admission_duration_seconds):
	// encoding the review, the round trip, the replica's answer and, for
	// an answer with a patch, applying it, which kube-apiserver times
	// together.
	WebhookCalls int
	WebhookMean  time.Duration
}

// webhookCalls reads the API server's count and total duration of its
// calls to the bench's webhooks for creates.
func (r *run) webhookCalls(ctx context.Context) (count int, total time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.host+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("API server metrics: %s", resp.Status)
	}
	const metric = "apiserver_admission_webhook_admission_duration_seconds"
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		ours := strings.Contains(line, `name="bench.shard.loom.dev"`) || strings.Contains(line, `name="noop.bench.loom.dev"`)
		if !strings.HasPrefix(line, metric) || !ours || !strings.Contains(line, `operation="CREATE"`) {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, perr := strconv.ParseFloat(line[sp+1:], 64)
		if perr != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, metric+"_sum{"):
			total += time.Duration(v * float64(time.Second))
		case strings.HasPrefix(line, metric+"_count{"):
			count += int(v)
		}
	}
	return count, total, sc.Err()
}

// probeModes are the ways new Shelves are created: with no webhook (the
// leader's watch labels them), with the assignment webhook, and with a
// webhook that allows every object unchanged (served by the same replica,
// with the same settings), which shows what calling any webhook costs on
// this machine.
var probeModes = []string{"watch", "webhook", "noop"}

// installWebhookConfig makes the webhook configuration, off: the
// assignment webhook, then the no-op one.
func (r *run) installWebhookConfig(ctx context.Context) error {
	url, noopURL := "https://placeholder/shard-bench", "https://placeholder"+noopPath
	w := shard.MutatingWebhook("bench", nil, admissionregistrationv1.WebhookClientConfig{URL: &url})
	noop := shard.MutatingWebhook("bench", nil, admissionregistrationv1.WebhookClientConfig{URL: &noopURL})
	noop.Name = "noop.bench.loom.dev"
	_, err := r.mwcs.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfig},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{w, noop},
	}, metav1.CreateOptions{})
	return err
}

// setWebhook turns on the webhook of mode (rules for Shelves), and the
// other off (no rules).
func (r *run) setWebhook(ctx context.Context, mode string) error {
	rules := shard.MutatingWebhook("bench", []client.Resource{shelfRes}, admissionregistrationv1.WebhookClientConfig{}).Rules
	for {
		c, err := r.mwcs.Get(ctx, webhookConfig, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Webhooks[0].Rules, c.Webhooks[1].Rules = nil, nil
		switch mode {
		case "webhook":
			c.Webhooks[0].Rules = rules
		case "noop":
			c.Webhooks[1].Rules = rules
		}
		if _, err = r.mwcs.Update(ctx, c, metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
}

// probe runs rounds of n creates in each mode and removes the probe
// objects afterwards.
func (r *run) probe(ctx context.Context, rounds, n int, quiet bool) ([]ProbeReport, error) {
	if quiet {
		r.upd.Lock() // holds the updater
		defer r.upd.Unlock()
	}
	type sample struct{ create, labelled time.Duration }
	samples := map[string][]sample{}
	calls, callTime := map[string]int{}, map[string]time.Duration{}
	atCreate := map[string]int{}
	label := shard.Label("bench")
	var names []string
	for round := range rounds {
		for _, mode := range probeModes {
			if err := r.setWebhook(ctx, mode); err != nil {
				return nil, err
			}
			time.Sleep(2 * time.Second) // the API server reloads webhook configurations
			c0, t0, err := r.webhookCalls(ctx)
			if err != nil {
				return nil, err
			}
			for i := range n {
				name := fmt.Sprintf("probe-%s-%d-%03d", mode, round, i)
				if quiet { // names of their own: the first probe's may still be going
					name = "probe-quiet-" + strings.TrimPrefix(name, "probe-")
				}
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "bench.loom.dev/v1", "kind": "Shelf",
					"metadata": map[string]any{"name": name, "namespace": ns},
					"spec":     map[string]any{"value": "probe"},
				}}
				start := time.Now()
				out, err := r.shelves.Create(ctx, obj, metav1.CreateOptions{})
				if err != nil {
					return nil, fmt.Errorf("probe create: %w", err)
				}
				created := time.Since(start)
				names = append(names, name)
				s := sample{create: created}
				if out.GetLabels()[label] != "" {
					atCreate[mode]++
				} else {
					for deadline := time.Now().Add(30 * time.Second); ; {
						m, err := r.meta.Get(ctx, name, metav1.GetOptions{})
						if err == nil && m.Labels[label] != "" {
							break
						}
						if time.Now().After(deadline) {
							return nil, fmt.Errorf("probe %s not labelled after 30 s", name)
						}
						time.Sleep(2 * time.Millisecond)
					}
				}
				s.labelled = time.Since(start)
				samples[mode] = append(samples[mode], s)
				// The next create waits for this Shelf's reconcile (its two
				// ConfigMaps), so that in every mode it meets the same
				// load: with the webhook, a Shelf is labelled, and so
				// reconciled, as soon as it is created.
				for deadline := time.Now().Add(30 * time.Second); ; {
					_, a := r.cmInf.Lister().Namespace(ns).Get(name + "-a")
					_, b := r.cmInf.Lister().Namespace(ns).Get(name + "-b")
					if a && b {
						break
					}
					if time.Now().After(deadline) {
						return nil, fmt.Errorf("probe %s not reconciled after 30 s", name)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			c1, t1, err := r.webhookCalls(ctx)
			if err != nil {
				return nil, err
			}
			calls[mode] += c1 - c0
			callTime[mode] += t1 - t0
		}
	}
	if err := r.setWebhook(ctx, "watch"); err != nil {
		return nil, err
	}
	// Remove the probes and the ConfigMaps their reconciles made.
	for _, name := range names {
		if err := r.shelves.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	cms, err := r.cmMeta.ListAll(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, "probe-") {
			if err := r.cmMeta.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
	}
	var out []ProbeReport
	for _, mode := range probeModes {
		ss := samples[mode]
		creates := make([]time.Duration, len(ss))
		labelled := make([]time.Duration, len(ss))
		for i, s := range ss {
			creates[i], labelled[i] = s.create, s.labelled
		}
		slices.Sort(creates)
		slices.Sort(labelled)
		pct := func(d []time.Duration, p float64) time.Duration {
			if len(d) == 0 {
				return 0
			}
			return d[min(len(d)-1, int(p*float64(len(d))))]
		}
		rep := ProbeReport{Mode: mode, Quiet: quiet, Creates: len(ss), LabelledAtCreate: atCreate[mode],
			CreateP50: pct(creates, 0.5), CreateP99: pct(creates, 0.99), LabelledP50: pct(labelled, 0.5), LabelledP99: pct(labelled, 0.99)}
		if calls[mode] > 0 {
			rep.WebhookCalls, rep.WebhookMean = calls[mode], callTime[mode]/time.Duration(calls[mode])
		}
		out = append(out, rep)
		name := mode
		if quiet {
			name += ", updates paused"
		}
		fmt.Fprintf(r.opts.Out, "new Shelves, %-7s: %d creates, %d labelled at create; create p50 %s p99 %s; labelled after p50 %s p99 %s\n",
			name, rep.Creates, rep.LabelledAtCreate, rep.CreateP50.Round(10*time.Microsecond), rep.CreateP99.Round(10*time.Microsecond),
			rep.LabelledP50.Round(10*time.Microsecond), rep.LabelledP99.Round(10*time.Microsecond))
		if rep.WebhookCalls > 0 {
			fmt.Fprintf(r.opts.Out, "    the API server's calls to the webhook: %d, mean %s\n", rep.WebhookCalls, rep.WebhookMean.Round(10*time.Microsecond))
		}
	}
	return out, nil
}
