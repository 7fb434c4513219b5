package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/shard"
	"github.com/loom-k8s/loom/webhook"
)

// The two ways new objects get their bucket label: the leader's watch of
// unassigned objects, and the assignment webhook. The probe creates Shelves
// one at a time and measures the create's latency and the time until the
// Shelf carries its bucket label (0 when the create's response has it).
// Two more modes call a webhook that changes nothing, served by a replica
// or by the driver, for what any webhook adds. The modes take turns
// create by create, in a shuffled order, so that the machine's load,
// which drifts over seconds, falls alike on all of them; a label on each
// probe (probeModeLabel) picks its webhook. Each create waits for the
// reconcile of the one before.

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
	// WebhookOver5ms and WebhookOver25ms count the calls that took longer
	// (from the same histogram's buckets).
	WebhookOver5ms, WebhookOver25ms int
	// AddedP99 is CreateP99 less that of the creates without a webhook
	// ("watch") in the same turns, and AddedLow and AddedHigh bound it:
	// the 5th and 95th percentiles of the same difference over the
	// samples drawn again with replacement 2,000 times (a percentile
	// bootstrap). Zero for "watch".
	AddedP99, AddedLow, AddedHigh time.Duration
}

// bootstraps is how many times addedP99 draws the samples again.
const bootstraps = 2000

// percentile is the p-th quantile (0 to 1) of sorted, 0 if it is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// p99 is the 99th percentile of d, which it sorts.
func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return percentile(d, 0.99)
}

// addedP99 returns p99(with) - p99(without) and the 90 % interval of that
// difference from a percentile bootstrap: both sets drawn again with
// replacement, the difference taken each time, and its 5th and 95th
// percentiles kept. The p99 of a few hundred samples rests on a handful
// of them, so the interval shows how far the one difference can be
// trusted.
func addedP99(with, without []time.Duration, rnd *rand.Rand) (diff, low, high time.Duration) {
	diff = p99(slices.Clone(with)) - p99(slices.Clone(without))
	if len(with) == 0 || len(without) == 0 {
		return diff, diff, diff
	}
	a, b := make([]time.Duration, len(with)), make([]time.Duration, len(without))
	diffs := make([]time.Duration, bootstraps)
	for i := range diffs {
		for j := range a {
			a[j] = with[rnd.IntN(len(with))]
		}
		for j := range b {
			b[j] = without[rnd.IntN(len(without))]
		}
		diffs[i] = p99(a) - p99(b)
	}
	slices.Sort(diffs)
	return diff, diffs[bootstraps*5/100], diffs[bootstraps*95/100]
}

// callStats are the API server's figures for its calls to one webhook.
type callStats struct {
	n      int           // calls
	total  time.Duration // their durations, summed
	over5  int           // calls that took more than 5 ms
	over25 int           // calls that took more than 25 ms
}

// webhookCalls reads the API server's count and durations of its calls to
// each of the bench's webhooks for creates, by probe mode.
func (r *run) webhookCalls(ctx context.Context) (map[string]callStats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.host+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("API server metrics: %s", resp.Status)
	}
	const metric = "apiserver_admission_webhook_admission_duration_seconds"
	under := map[string]map[string]int{} // mode -> bucket bound -> calls at most that long
	out := map[string]callStats{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		mode := ""
		switch {
		case strings.Contains(line, `name="bench.shard.loom.dev"`):
			mode = "webhook"
		case strings.Contains(line, `name="noop.bench.loom.dev"`):
			mode = "noop"
		case strings.Contains(line, `name="driver-noop.bench.loom.dev"`):
			mode = "drvnoop"
		}
		if !strings.HasPrefix(line, metric) || mode == "" || !strings.Contains(line, `operation="CREATE"`) {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, perr := strconv.ParseFloat(line[sp+1:], 64)
		if perr != nil {
			continue
		}
		st := out[mode]
		switch {
		case strings.HasPrefix(line, metric+"_sum{"):
			st.total += time.Duration(v * float64(time.Second))
		case strings.HasPrefix(line, metric+"_count{"):
			st.n += int(v)
		case strings.HasPrefix(line, metric+"_bucket{"):
			for _, le := range []string{"0.005", "0.025"} {
				if strings.Contains(line, `le="`+le+`"`) {
					if under[mode] == nil {
						under[mode] = map[string]int{}
					}
					under[mode][le] += int(v)
				}
			}
		}
		out[mode] = st
	}
	for mode, st := range out {
		st.over5, st.over25 = st.n-under[mode]["0.005"], st.n-under[mode]["0.025"]
		out[mode] = st
	}
	return out, sc.Err()
}

// probeModes are the ways new Shelves are created: with no webhook (the
// leader's watch labels them), with the assignment webhook, with a
// webhook that allows every object unchanged (served by the same replica,
// with the same settings), which shows what calling any webhook costs on
// this machine, and with the same no-op webhook served by the driver, a
// lightly loaded process, which shows how much of that cost is the
// serving replica's own load.
var probeModes = []string{"watch", "webhook", "noop", "drvnoop"}

// probeModeLabel picks a probe's webhook: each of the three webhooks
// selects the Shelves whose label names its mode.
const probeModeLabel = "probe.bench.loom.dev/mode"

// installWebhookConfig makes the webhook configuration: the assignment
// webhook, then the no-op one, each for the Shelves labelled with its
// probe mode, and otherwise as a sharded manager configures it.
func (r *run) installWebhookConfig(ctx context.Context) error {
	url, noopURL := "https://placeholder/shard-bench", "https://placeholder"+noopPath
	w := shard.MutatingWebhook("bench", []client.Resource{shelfRes}, admissionregistrationv1.WebhookClientConfig{URL: &url})
	noop := shard.MutatingWebhook("bench", []client.Resource{shelfRes}, admissionregistrationv1.WebhookClientConfig{URL: &noopURL})
	noop.Name = "noop.bench.loom.dev"
	for m, wh := range map[string]*admissionregistrationv1.MutatingWebhook{"webhook": &w, "noop": &noop} {
		sel := *wh.ObjectSelector
		sel.MatchExpressions = append(slices.Clone(sel.MatchExpressions),
			metav1.LabelSelectorRequirement{Key: probeModeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{m}})
		wh.ObjectSelector = &sel
	}
	_, err := r.mwcs.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfig},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{w, noop},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return r.serveDriverNoop(ctx, noop)
}

// serveDriverNoop serves the no-op webhook from the driver's own process
// too, with its own certificates, and configures it, like noop, for the
// probes of mode "drvnoop".
func (r *run) serveDriverNoop(ctx context.Context, noop admissionregistrationv1.MutatingWebhook) error {
	dir := filepath.Join(r.opts.Dir, "driver.certs")
	certs, err := webhook.NewCerts(webhook.CertOptions{Dir: dir, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return err
	}
	if err := certs.Ensure(); err != nil {
		return err
	}
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: dir})
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	srv.Register(noopPath, webhook.Admission(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return webhook.Allowed()
	}))
	go func() {
		// A server that stops early would leave its probes unanswered
		// (the webhook fails open): say so in the report.
		if err := srv.Start(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintln(r.opts.Out, "the driver's webhook server stopped:", err)
		}
	}()
	url := "https://" + srv.Addr().String() + noopPath
	wh := noop
	wh.Name = "driver-noop.bench.loom.dev"
	wh.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: certs.CABundle()}
	sel := *wh.ObjectSelector
	sel.MatchExpressions = slices.Clone(sel.MatchExpressions)
	sel.MatchExpressions[len(sel.MatchExpressions)-1].Values = []string{"drvnoop"}
	wh.ObjectSelector = &sel
	_, err = r.mwcs.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfig + "-driver"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{wh},
	}, metav1.CreateOptions{})
	return err
}

// probeBatch is how many probe Shelves the probe keeps before it removes
// them, with their ConfigMaps, between two turns: so a long probe
// measures creates in a cluster of the scenario's size, not one that
// grows by three Shelves and six ConfigMaps a turn, and no removal runs
// while a create is timed.
const probeBatch = 300

// removeProbes deletes the named probe Shelves and their ConfigMaps, and
// waits until the driver's cache has seen the ConfigMaps go. A ConfigMap
// still cached a second later is deleted again: a reconcile that was
// still going when its Shelf went may have made it anew.
func (r *run) removeProbes(ctx context.Context, names []string) error {
	var cms []string
	for _, name := range names {
		if err := r.shelves.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		cms = append(cms, name+"-a", name+"-b")
	}
	for deadline := time.Now().Add(time.Minute); len(cms) > 0; {
		for _, cm := range cms {
			if err := r.cmMeta.Delete(ctx, cm, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		for again := time.Now().Add(time.Second); len(cms) > 0 && time.Now().Before(again); {
			cms = slices.DeleteFunc(cms, func(cm string) bool {
				_, ok := r.cmInf.Indexer().Get(ns + "/" + cm)
				return !ok
			})
			time.Sleep(10 * time.Millisecond)
		}
		if len(cms) > 0 && time.Now().After(deadline) {
			return fmt.Errorf("%d probe ConfigMaps, such as %s, still cached a minute after their deletion", len(cms), cms[0])
		}
	}
	return nil
}

// probeShelf is a new probe Shelf for mode.
func probeShelf(name, mode string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bench.loom.dev/v1", "kind": "Shelf",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{probeModeLabel: mode}},
		"spec":     map[string]any{"value": "probe"},
	}}
}

// probe creates n Shelves in each mode, the modes taking turns, and
// removes the probe objects as it goes (see probeBatch).
func (r *run) probe(ctx context.Context, n int, quiet bool) ([]ProbeReport, error) {
	if quiet {
		r.upd.Lock() // holds the updater
		defer r.upd.Unlock()
	}
	type sample struct{ create, labelled time.Duration }
	samples := map[string][]sample{}
	atCreate := map[string]int{}
	label := shard.BucketLabel("bench")
	var names []string
	calls0, err := r.webhookCalls(ctx)
	if err != nil {
		return nil, err
	}
	rnd := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range n {
		order := slices.Clone(probeModes)
		rnd.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, mode := range order {
			name := fmt.Sprintf("probe-%s-%04d", mode, i)
			if quiet { // names of their own: the first probe's may still be going
				name = "probe-quiet-" + strings.TrimPrefix(name, "probe-")
			}
			start := time.Now()
			out, err := r.shelves.Create(ctx, probeShelf(name, mode), metav1.CreateOptions{})
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
				_, a := r.cmInf.Indexer().Get(ns + "/" + name + "-a")
				_, b := r.cmInf.Indexer().Get(ns + "/" + name + "-b")
				if a && b {
					break
				}
				if time.Now().After(deadline) {
					return nil, fmt.Errorf("probe %s not reconciled after 30 s", name)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		if len(names) >= probeBatch {
			if err := r.removeProbes(ctx, names); err != nil {
				return nil, err
			}
			names = names[:0]
		}
	}
	calls1, err := r.webhookCalls(ctx)
	if err != nil {
		return nil, err
	}
	calls := map[string]callStats{}
	for m, c1 := range calls1 {
		c0 := calls0[m]
		calls[m] = callStats{n: c1.n - c0.n, total: c1.total - c0.total, over5: c1.over5 - c0.over5, over25: c1.over25 - c0.over25}
	}
	if err := r.removeProbes(ctx, names); err != nil {
		return nil, err
	}
	// And any probe ConfigMap a reconcile made again after its removal.
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
	var none []time.Duration // the creates without a webhook: "watch" comes first
	for _, mode := range probeModes {
		ss := samples[mode]
		creates := make([]time.Duration, len(ss))
		labelled := make([]time.Duration, len(ss))
		for i, s := range ss {
			creates[i], labelled[i] = s.create, s.labelled
		}
		slices.Sort(creates)
		slices.Sort(labelled)
		rep := ProbeReport{Mode: mode, Quiet: quiet, Creates: len(ss), LabelledAtCreate: atCreate[mode],
			CreateP50: percentile(creates, 0.5), CreateP99: percentile(creates, 0.99), LabelledP50: percentile(labelled, 0.5), LabelledP99: percentile(labelled, 0.99)}
		if mode == "watch" {
			none = creates
		} else {
			rep.AddedP99, rep.AddedLow, rep.AddedHigh = addedP99(creates, none, rnd)
		}
		if c := calls[mode]; c.n > 0 {
			rep.WebhookCalls, rep.WebhookMean = c.n, c.total/time.Duration(c.n)
			rep.WebhookOver5ms, rep.WebhookOver25ms = c.over5, c.over25
		}
		out = append(out, rep)
		name := mode
		if quiet {
			name += ", updates paused"
		}
		fmt.Fprintf(r.opts.Out, "new Shelves, %-8s: %d creates, %d labelled at create; create p50 %s p99 %s; labelled after p50 %s p99 %s\n",
			name, rep.Creates, rep.LabelledAtCreate, rep.CreateP50.Round(10*time.Microsecond), rep.CreateP99.Round(10*time.Microsecond),
			rep.LabelledP50.Round(10*time.Microsecond), rep.LabelledP99.Round(10*time.Microsecond))
		if rep.WebhookCalls > 0 {
			fmt.Fprintf(r.opts.Out, "    the API server's calls to the webhook: %d, mean %s, %d over 5 ms, %d over 25 ms\n",
				rep.WebhookCalls, rep.WebhookMean.Round(10*time.Microsecond), rep.WebhookOver5ms, rep.WebhookOver25ms)
		}
		if mode != "watch" {
			fmt.Fprintf(r.opts.Out, "    added to the create p99 over no webhook: %s (90%% bootstrap interval %s to %s)\n",
				rep.AddedP99.Round(10*time.Microsecond), rep.AddedLow.Round(10*time.Microsecond), rep.AddedHigh.Round(10*time.Microsecond))
		}
	}
	return out, nil
}
