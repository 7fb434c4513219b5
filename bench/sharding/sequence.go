package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/shard"
)

var shelfGK = schema.GroupKind{Group: "bench.loom.dev", Kind: "Shelf"}

// sequence runs the baseline and the steps 1 -> 3 -> 5 -> 2 -> kill -9.
func (r *run) sequence(ctx context.Context) (*Report, error) {
	rep := &Report{}
	ctx, stopUpdates := context.WithCancel(ctx)
	defer stopUpdates()
	go r.updater(ctx)

	// The baseline: one unsharded replica holding everything.
	if err := r.start(""); err != nil {
		return nil, err
	}
	if _, err := r.caughtUp(ctx, nil, time.Now(), 5*time.Minute); err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	heaps, err := r.heaps(ctx)
	if err != nil {
		return nil, err
	}
	rep.Baseline = heaps[0]
	fmt.Fprintf(r.opts.Out, "baseline: one unsharded replica, heap %.1f MB, %d Shelves, %d ConfigMaps cached\n",
		float64(rep.Baseline.Bytes)/1e6, rep.Baseline.Shelves, rep.Baseline.ConfigMaps)
	if err := r.stop("solo"); err != nil {
		return nil, err
	}
	if err := r.installWebhookConfig(ctx); err != nil {
		return nil, err
	}

	before := map[string]string{}
	type step struct {
		name      string
		act       func() error
		bound     time.Duration
		addedFrom int // replicas before, when replicas are only added
	}
	steps := []step{
		{"start r1", func() error { return r.start("r1") }, 5 * time.Minute, 0},
		{"1 -> 3", func() error { return errors.Join(r.start("r2"), r.start("r3")) }, 10 * time.Second, 1},
		{"3 -> 5", func() error { return errors.Join(r.start("r4"), r.start("r5")) }, 10 * time.Second, 3},
		{"5 -> 2 (r2, r4, r5 stop)", func() error { return r.stop("r2", "r4", "r5") }, 10 * time.Second, 0},
		{"kill -9 r1 (the leader)", func() error { r.kill("r1"); return nil }, 15*time.Second + 10*time.Second, 0},
	}
	for i, s := range steps {
		var cpu0 map[string]float64
		if r.opts.CPU {
			cpu0 = r.cpuSnapshot()
		}
		req0, err := r.requestCounts(ctx)
		if err != nil {
			return nil, err
		}
		profiled := make(chan error, 1)
		if r.opts.ProfileDir != "" {
			go func() {
				// At most 40 s: the first step's bound is minutes.
				profiled <- r.profileAPIServer(ctx, r.opts.ProfileDir, fmt.Sprintf("step%d-apiserver", i), min(s.bound+10*time.Second, 40*time.Second))
			}()
		} else {
			profiled <- nil
		}
		r.mu.Lock()
		counts, failed := maps.Clone(r.reconciles), maps.Clone(r.failed)
		r.mu.Unlock()
		t0 := time.Now()
		if err := s.act(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		acted := time.Since(t0)
		live := slices.Sorted(maps.Keys(r.procs))
		ring := shard.NewRing(live, shard.RingOptions{})
		sr := StepReport{Name: s.name, Replicas: live, Bound: s.bound, Acted: acted}
		after, settled, err := r.settle(ctx, ring, t0, s.bound+time.Minute)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		sr.Settled = settled
		if sr.CaughtUp, err = r.caughtUp(ctx, ring, t0, s.bound+time.Minute); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		d := time.Since(t0)
		req1, err := r.requestCounts(ctx)
		if err != nil {
			return nil, err
		}
		sr.SentShelves, sr.SentConfigMaps = sentObjects(req0, req1)
		if r.opts.CPU {
			sr.CPU = cpuLine(cpu0, r.cpuSnapshot(), d) + "\n    " + requestLine(req0, req1, d)
		}
		if len(before) > 0 {
			moved := 0
			for k, v := range after {
				if before[k] != v {
					moved++
				}
			}
			sr.Moved = float64(moved) / float64(len(after))
			if s.addedFrom > 0 {
				sr.MoveBound = 1.3 * float64(len(live)-s.addedFrom) / float64(len(live))
			}
		}
		before = after
		if sr.Heaps, err = r.heaps(ctx); err != nil {
			return nil, err
		}
		r.mu.Lock()
		sr.Reconciles, sr.Failed = map[string]int{}, map[string]int{}
		for _, id := range live {
			sr.Reconciles[id] = r.reconciles[id] - counts[id]
			sr.Failed[id] = r.failed[id] - failed[id]
		}
		r.mu.Unlock()
		fair := float64(r.opts.Shelves) / float64(len(live))
		for _, h := range sr.Heaps {
			if f := float64(h.Shelves) / fair; f < 0.8 || f > 1.25 {
				sr.Unbalanced = append(sr.Unbalanced, fmt.Sprintf("%s caches %d Shelves, %.2f of a fair share", h.Replica, h.Shelves, f))
			}
		}
		rep.Steps = append(rep.Steps, sr)
		r.print(sr, rep.Baseline)
		if err := <-profiled; err != nil {
			return nil, err
		}
		if s.name == "1 -> 3" && r.opts.ProbeCreates > 0 {
			// Under the workload's updates, then with them paused: the
			// second tells the webhook's own cost from the machine's
			// load.
			for _, quiet := range []bool{false, true} {
				ps, err := r.probe(ctx, r.opts.ProbeCreates, quiet)
				if err != nil {
					return nil, err
				}
				rep.Probes = append(rep.Probes, ps...)
			}
		}
	}
	stopUpdates()
	rep.Overlaps = r.overlaps()
	fmt.Fprintf(r.opts.Out, "overlapping reconciles: %d\n", len(rep.Overlaps))
	for _, o := range rep.Overlaps[:min(len(rep.Overlaps), 10)] {
		fmt.Fprintln(r.opts.Out, "  ", o)
	}
	return rep, nil
}

func (r *run) print(sr StepReport, base Heap) {
	var hs []string
	for _, h := range sr.Heaps {
		hs = append(hs, fmt.Sprintf("%s %.2f MB (%.3fx) %d/%d", h.Replica, float64(h.Bytes)/1e6, float64(h.Bytes)/float64(base.Bytes), h.Shelves, h.ConfigMaps))
	}
	var rs []string
	for _, id := range sr.Replicas {
		rs = append(rs, fmt.Sprintf("%s %d (%d failed)", id, sr.Reconciles[id], sr.Failed[id]))
	}
	move := fmt.Sprintf("moved %.3f", sr.Moved)
	if sr.MoveBound > 0 {
		move += fmt.Sprintf(" (bound %.3f)", sr.MoveBound)
	}
	fmt.Fprintf(r.opts.Out, "%-26s settled %6.2fs  caught up %6.2fs (bound %s)  %s\n    the change itself (spawn, or stop and exit) took %.2fs\n    heap, Shelves/ConfigMaps cached: %s\n    reconciles: %s\n    sent by the API server until caught up (list items and watch events): %d Shelves, %d ConfigMaps\n",
		sr.Name, sr.Settled.Seconds(), sr.CaughtUp.Seconds(), sr.Bound, move, sr.Acted.Seconds(), strings.Join(hs, ", "), strings.Join(rs, ", "), sr.SentShelves, sr.SentConfigMaps)
	if sr.CPU != "" {
		fmt.Fprintln(r.opts.Out, "   ", sr.CPU)
	}
	for _, u := range sr.Unbalanced {
		fmt.Fprintln(r.opts.Out, "    UNBALANCED:", u)
	}
}

// updater changes a random Shelf UpdateRate times a second until ctx ends.
func (r *run) updater(ctx context.Context) {
	if r.opts.UpdateRate <= 0 {
		return
	}
	tick := time.NewTicker(time.Second / time.Duration(r.opts.UpdateRate))
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		name := fmt.Sprintf("shelf-%05d", rand.IntN(r.opts.Shelves))
		value := strconv.Itoa(i)
		r.upd.Lock()
		_, err := r.shelves.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"value":"`+value+`"}}`), metav1.PatchOptions{})
		if err == nil {
			r.mu.Lock()
			r.written[ns+"/"+name] = value
			r.mu.Unlock()
		}
		r.upd.Unlock()
	}
}

// settle waits until every Shelf and every owned ConfigMap carries its
// bucket label, and the Lease of every live replica claims exactly the
// buckets ring gives it: the buckets have changed hands. It returns each
// Shelf's shard on ring.
func (r *run) settle(ctx context.Context, ring *shard.Ring, t0 time.Time, bound time.Duration) (map[string]string, time.Duration, error) {
	bucket := shard.BucketLabel("bench")
	lastReport := time.Now()
	// This loop runs ten times a second over 15,000 objects, and its CPU
	// is taken from the replicas and the API server it measures. Each
	// object's bucket is worked out once; once all objects were seen
	// labelled, only the Leases are read.
	want := map[string]string{}
	bucketOf := func(gk schema.GroupKind, o *metav1.PartialObjectMetadata) string {
		k := gk.Kind + "/" + o.Name
		w, ok := want[k]
		if !ok {
			w = strconv.Itoa(shard.Bucket(shard.Key(gk, o)))
			want[k] = w
		}
		return w
	}
	labelled := false
	claims := map[string]string{}
	for _, id := range ring.Members() {
		claims[id] = shard.EncodeClaims(ring.Buckets(id))
	}
	for {
		for _, p := range r.procs {
			r.readLog(p)
		}
		why := ""
		var unlabelled, unclaimed int
		switch {
		case !r.shelfInf.HasSynced() || !r.cmInf.HasSynced():
			why = "the driver's informers have not synced"
		case !labelled:
			for _, o := range r.shelfInf.Indexer().List() {
				if o.Labels[bucket] != bucketOf(shelfGK, o) {
					why = fmt.Sprintf("shelf %s in bucket %q, want %q", o.Name, o.Labels[bucket], bucketOf(shelfGK, o))
					unlabelled++
				}
			}
			for _, o := range r.cmInf.Indexer().List() {
				if metav1.GetControllerOfNoCopy(o) == nil {
					continue
				}
				if o.Labels[bucket] != bucketOf(schema.GroupKind{Kind: "ConfigMap"}, o) {
					why = fmt.Sprintf("configmap %s in bucket %q, want %q", o.Name, o.Labels[bucket], bucketOf(schema.GroupKind{Kind: "ConfigMap"}, o))
					unlabelled++
				}
			}
			labelled = why == ""
		}
		if why == "" {
			for id, c := range claims {
				l, err := r.leases.Get(ctx, "bench-"+id, metav1.GetOptions{})
				if err != nil || l.Annotations[shard.ClaimsAnnotation] != c {
					why = fmt.Sprintf("the Lease of %s does not claim its buckets yet (%v)", id, err)
					unclaimed++
				}
			}
		}
		if time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			fmt.Fprintf(r.opts.Out, "    %5.1fs: objects without their bucket label %d, replicas not claiming their buckets %d\n",
				time.Since(t0).Seconds(), unlabelled, unclaimed)
		}
		if why == "" {
			shards := map[string]string{}
			for _, o := range r.shelfInf.Indexer().List() {
				shards[o.Name], _ = ring.Shard(shard.Key(shelfGK, o))
			}
			return shards, time.Since(t0), nil
		}
		if time.Since(t0) > bound {
			return nil, 0, fmt.Errorf("not settled after %s: %s", bound, why)
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// caughtUp pauses the updates and waits until every Shelf's last written
// value has been reconciled, by its shard on ring (any replica when ring
// is nil). It returns the time since t0.
func (r *run) caughtUp(ctx context.Context, ring *shard.Ring, t0 time.Time, bound time.Duration) (time.Duration, error) {
	r.upd.Lock()
	defer r.upd.Unlock()
	why := ""
	wants := map[string]string{} // each Shelf's shard on ring, worked out once
	for {
		for _, p := range r.procs {
			r.readLog(p)
		}
		ok := true
		r.mu.Lock()
		for key, v := range r.written {
			last := r.last[key]
			want := last.replica
			if ring != nil {
				w, known := wants[key]
				if !known {
					w, _ = ring.Shard(shard.Key(shelfGK, &metav1.ObjectMeta{Namespace: ns, Name: strings.TrimPrefix(key, ns+"/")}))
					wants[key] = w
				}
				want = w
			}
			if last.value != v || last.replica != want {
				ok, why = false, fmt.Sprintf("%s: wrote %q, last reconciled %q by %q (want %q)", key, v, last.value, last.replica, want)
				break
			}
		}
		r.mu.Unlock()
		if ok {
			return time.Since(t0), nil
		}
		if time.Since(t0) > bound {
			return 0, fmt.Errorf("not caught up after %s: %s", bound, why)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heaps asks every live replica for its heap and cache sizes. It pauses
// the updates for a quiet moment first (2 s), so that every replica is
// measured at rest, then asks three times half a second apart and keeps
// the least heap: the live data, without work still in flight.
func (r *run) heaps(ctx context.Context) ([]Heap, error) {
	r.upd.Lock()
	defer r.upd.Unlock()
	time.Sleep(2 * time.Second)
	var rounds [3][]Heap
	for i := range rounds {
		if i > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		hs, err := r.heapsOnce(ctx)
		if err != nil {
			return nil, err
		}
		rounds[i] = hs
	}
	out := rounds[0]
	for j := range out {
		out[j].Bytes = min(rounds[0][j].Bytes, rounds[1][j].Bytes, rounds[2][j].Bytes)
	}
	return out, nil
}

// heapsOnce asks every live replica once.
func (r *run) heapsOnce(ctx context.Context) ([]Heap, error) {
	var out []Heap
	for _, id := range slices.Sorted(maps.Keys(r.procs)) {
		p := r.procs[id]
		r.readLog(p)
		_ = p.cmd.Process.Signal(syscall.SIGUSR1)
		deadline := time.Now().Add(time.Minute)
		for {
			if ms := r.readLog(p); len(ms) > 0 {
				h := Heap{Replica: id}
				for _, f := range strings.Fields(ms[len(ms)-1]) {
					k, v, _ := strings.Cut(f, "=")
					n, _ := strconv.ParseInt(v, 10, 64)
					switch k {
					case "heap":
						h.Bytes = n
					case "shelves":
						h.Shelves = int(n)
					case "configmaps":
						h.ConfigMaps = int(n)
					}
				}
				out = append(out, h)
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("replica %s reported no heap", id)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return out, nil
}

// overlaps finds reconciles of one key by two replicas at once. A killed
// replica's reconciles in flight end at its kill.
func (r *run) overlaps() []string {
	for _, p := range r.procs {
		r.readLog(p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.dead {
		for k, start := range r.open {
			id, key, _ := strings.Cut(k, " ")
			if id == p.id {
				r.intervals[key] = append(r.intervals[key], interval{start, p.killed, id})
			}
		}
	}
	var out []string
	for key, ivs := range r.intervals {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
		var end int64
		var by string
		for _, iv := range ivs {
			if iv.start < end && iv.replica != by {
				out = append(out, fmt.Sprintf("%s: %s from %d, while %s until %d", key, iv.replica, iv.start, by, end))
			}
			if iv.end > end {
				end, by = iv.end, iv.replica
			}
		}
	}
	sort.Strings(out)
	return out
}
