package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// The floor of a step: how fast this machine's kube-apiserver takes the
// label writes that moving objects between shards needs, with nothing
// else of Loom running. A step of the scenario that moves k objects, one
// label write each, cannot catch up sooner than the floor's time for k
// writes: the floor leaves out the replicas, their watches and their
// reconciles, which only add work.
//
// The objects are the scenario's: Shelves, each owning two ConfigMaps,
// all labelled for one shard. Each round moves the objects that 1 -> 3
// moves (two in three Shelves by their hash, and their ConfigMaps: 9,990
// objects with 5,000 Shelves) to another shard and back, with the same conditional
// JSON patch a move makes, through the metadata client, a set number of
// writes at once. It runs with the workload's writes off, then on (the
// Shelf updates, and the two ConfigMap updates each that the replicas'
// reconciles would make). Last, it times the lists that the two new
// shards of a hand-over by fixed hash buckets would make instead of the
// writes.

// FloorOptions configure the floor's run.
type FloorOptions struct {
	Shelves     int   // each owns two ConfigMaps
	UpdateRate  int   // Shelf updates per second while the workload is on
	Concurrency []int // writes in flight, one round each (with and without the workload)
}

// moveLabel is the label whose writes the floor times: the shard label
// that objects carried before shards handed buckets over instead.
const moveLabel = "shard.loom.dev/bench"

// bucketLabel holds each object's fixed hash bucket in the floor's run.
const bucketLabel = "floor.loom.dev/bucket"

// FloorRound is one round of the floor: label writes, or (the last) the
// lists a hand-over by buckets would make instead.
type FloorRound struct {
	Writes         int // label writes made, one per object that moves
	Listed         int // objects listed by the new shards (the last round)
	Concurrency    int
	Workload       bool
	WorkloadWrites int64 // the workload's writes during the round
	Took           time.Duration
}

// Floor runs the floor's rounds on a fresh control plane and writes a
// line per round. Each round's writes test the label that the round
// before left, so a write that did not land fails the next round.
func Floor(ctx context.Context, opts FloorOptions, out func(format string, args ...any)) ([]FloorRound, error) {
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	dir, err := os.MkdirTemp("", "loom-floor-") // the replicas' kubeconfig goes there, unused
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	r := &run{opts: Options{Shelves: opts.Shelves, Dir: dir}, env: env, kubecfg: env.KubeconfigPath, written: map[string]string{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		return nil, err
	}
	defer rc.CloseIdleConnections()
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	label := moveLabel
	// bucket is a Shelf's fixed hash bucket, which its ConfigMaps carry
	// too: what a hand-over by buckets would select on. With 255 buckets,
	// a bucket's remainder by 3 is its Shelf's hash's, so the buckets
	// whose remainder is 1 or 2 hold exactly the objects that move.
	bucket := func(name string) uint32 {
		h := fnv.New32a()
		h.Write([]byte(name))
		return h.Sum32() % 255
	}

	// Every Shelf and its two ConfigMaps on shard "r1", as after the
	// scenario's first step, with their bucket.
	type object struct {
		c    *client.Client[*metav1.PartialObjectMetadata]
		name string
	}
	err = parallel(8, opts.Shelves, func(i int) error {
		name := fmt.Sprintf("shelf-%05d", i)
		b := strconv.Itoa(int(bucket(name)))
		shelf, err := r.meta.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+label+`":"r1","`+bucketLabel+`":"`+b+`"}}}`), metav1.PatchOptions{})
		if err != nil {
			return err
		}
		for _, suffix := range []string{"-a", "-b"} {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: name + suffix, Labels: map[string]string{label: "r1", bucketLabel: b},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "bench.loom.dev/v1", Kind: "Shelf", Name: name, UID: shelf.UID, Controller: new(true)}},
			}, Data: map[string]string{"value": "v" + strconv.Itoa(i)}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var moving []object // two in three Shelves, as 1 -> 3 moves, and their ConfigMaps
	for i := range opts.Shelves {
		if name := fmt.Sprintf("shelf-%05d", i); bucket(name)%3 != 0 {
			moving = append(moving, object{r.meta, name}, object{r.cmMeta, name + "-a"}, object{r.cmMeta, name + "-b"})
		}
	}

	// The workload: UpdateRate Shelf updates a second, each followed by
	// the updates of its two ConfigMaps, as a reconcile makes them.
	var workload atomic.Bool
	var workloadWrites atomic.Int64
	go func() {
		tick := time.NewTicker(time.Second / time.Duration(max(opts.UpdateRate, 1)))
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !workload.Load() {
				continue
			}
			go func() {
				name := fmt.Sprintf("shelf-%05d", rand.IntN(opts.Shelves))
				value := strconv.Itoa(i)
				if _, err := r.shelves.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"value":"`+value+`"}}`), metav1.PatchOptions{}); err != nil {
					return
				}
				workloadWrites.Add(1)
				for _, suffix := range []string{"-a", "-b"} {
					if _, err := cms.Patch(ctx, name+suffix, types.MergePatchType, []byte(`{"data":{"value":"`+value+`"}}`), metav1.PatchOptions{}); err == nil {
						workloadWrites.Add(1)
					}
				}
			}()
		}
	}()

	// start turns the workload on and waits until it has made a few
	// writes, so that it runs at its pace when a round starts.
	start := func() error {
		w := workloadWrites.Load()
		workload.Store(true)
		for deadline := time.Now().Add(time.Minute); workloadWrites.Load() < w+6; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("the workload made no write in a minute")
			}
		}
		return nil
	}

	path := "/metadata/labels/" + strings.ReplaceAll(label, "/", "~1") // a JSON pointer
	from, to := "r1", "r2"
	var rounds []FloorRound
	round := func(withWorkload bool, concurrency int) error {
		defer workload.Store(false)
		if withWorkload {
			if err := start(); err != nil {
				return err
			}
		}
		before := r.cpuSnapshot()
		w0 := workloadWrites.Load()
		t0 := time.Now()
		have, want := from, to
		err := parallel(concurrency, len(moving), func(i int) error {
			o := moving[i]
			patch := `[{"op":"test","path":"` + path + `","value":"` + have + `"},{"op":"replace","path":"` + path + `","value":"` + want + `"}]`
			_, err := o.c.Patch(ctx, o.name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
			return err
		})
		d := time.Since(t0)
		if err != nil {
			return err
		}
		from, to = to, from
		rounds = append(rounds, FloorRound{Writes: len(moving), Concurrency: concurrency, Workload: withWorkload, WorkloadWrites: workloadWrites.Load() - w0, Took: d})
		mode := "workload off"
		if withWorkload {
			mode = fmt.Sprintf("workload on (%d writes during the round)", workloadWrites.Load()-w0)
		}
		out("%6d label writes, %3d in flight, %s: %6.2f s (%4.0f moves/s)\n    %s\n", len(moving), concurrency, mode, d.Seconds(), float64(len(moving))/d.Seconds(), cpuLine(before, r.cpuSnapshot(), d))
		return nil
	}
	for _, withWorkload := range []bool{false, true} {
		for _, c := range opts.Concurrency {
			if err := round(withWorkload, c); err != nil {
				return rounds, err
			}
		}
	}

	// What a hand-over by buckets would read instead: the two new shards
	// each list, whole, the Shelves and ConfigMaps of their buckets, at
	// the same time, beside the workload. Nothing is written; the shards'
	// decoding is the driver's here.
	if err := start(); err != nil {
		return rounds, err
	}
	before := r.cpuSnapshot()
	t0 := time.Now()
	var listed atomic.Int64
	err = parallel(2, 2, func(i int) error {
		var in []string
		for b := i + 1; b < 255; b += 3 {
			in = append(in, strconv.Itoa(b))
		}
		sel := metav1.ListOptions{LabelSelector: bucketLabel + " in (" + strings.Join(in, ",") + ")", Limit: 500}
		var shelves, configMaps int // a list that starts again counts again
		if err := r.shelves.Pages(ctx, sel, func() { shelves = 0 }, func(l *client.List[*unstructured.Unstructured]) error {
			shelves += len(l.Items)
			return nil
		}); err != nil {
			return err
		}
		if err := cms.Pages(ctx, sel, func() { configMaps = 0 }, func(l *client.List[*corev1.ConfigMap]) error {
			configMaps += len(l.Items)
			return nil
		}); err != nil {
			return err
		}
		listed.Add(int64(shelves + configMaps))
		return nil
	})
	d := time.Since(t0)
	workload.Store(false)
	if err != nil {
		return rounds, err
	}
	rounds = append(rounds, FloorRound{Listed: int(listed.Load()), Workload: true, Took: d})
	out("%6d objects listed whole by two new shards at once, by bucket, workload on: %6.2f s\n    %s\n", listed.Load(), d.Seconds(), cpuLine(before, r.cpuSnapshot(), d))
	return rounds, nil
}

// parallel runs fn(0) ... fn(n-1), k at a time, and returns the first error.
func parallel(k, n int, fn func(i int) error) error {
	work := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range k {
		wg.Go(func() {
			for i := range work {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}
