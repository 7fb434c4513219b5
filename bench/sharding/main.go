// Command sharding runs the acceptance scenario of sharded managers: Loom
// managers as separate OS processes, one shard each, on one real
// kube-apiserver (testenv), reconciling Shelves (a custom resource) that
// each own two ConfigMaps, while a writer keeps changing the Shelves.
//
// The sequence: a baseline with one unsharded replica (its heap is the
// reference), then 1 -> 3 -> 5 -> 2 sharded replicas (the last step stops
// three gracefully), then kill -9 of the leader. After each step it
// reports how long until every object was on its shard, and until every
// change made so far was reconciled by the right shard; how many Shelves
// moved (against 1.3 k/(N+k) when k replicas join N); each replica's heap
// after a GC and what its informers hold; and the reconciles per replica.
// After 1 -> 3 it creates new Shelves one at a time, alternately with the
// assignment webhook off (the leader's watch labels them), on, and
// replaced by a webhook that changes nothing (served by a replica, or by
// the driver, a lightly loaded process), and reports each mode's
// create latency, time until labelled and the API server's mean call to
// the webhook; it does so under the workload's updates, then again with
// them paused. At the end
// it checks, across the replicas' logs (CLOCK_MONOTONIC), that no Shelf
// was ever reconciled by two replicas at once.
//
// Usage (from bench/):
//
//	go run ./sharding [-shelves 5000] [-rate 50] [-probes 200] [-out FILE] [-keep] [-cpu] [-apiserver-profile DIR] [-apiserver-args FLAGS]
//	go run ./sharding -overhead [-out FILE]
//	go run ./sharding -floor [-shelves 5000] [-rate 50] [-out FILE]
//
// -overhead measures instead the leader's extra heap for sharding (the
// ring's membership and the assigner, after three passes) over 1,000 and
// 10,000 objects that are all assigned, twice each.
//
// -floor times instead the label writes that 1 -> 3 makes (two in three
// objects move), with no replica running: the least time any step that
// writes each moved object once can take on this machine. Then it times
// what a hand-over by fixed hash buckets would read instead: the two new
// shards list the objects of their buckets, whole.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	maybeReplica()
	shelves := flag.Int("shelves", 5000, "Shelves (primary objects), each owning two ConfigMaps")
	rate := flag.Int("rate", 50, "Shelf updates per second, throughout")
	outPath := flag.String("out", "", "also append the report to this file")
	probes := flag.Int("probes", 200, "new Shelves created in each mode (the leader's watch, the assignment webhook, a no-op webhook in a replica and in the driver) after 1 -> 3")
	overhead := flag.Bool("overhead", false, "instead of the scenario, measure the leader's extra heap for sharding with 1,000 and 10,000 objects")
	quiet := flag.Bool("quiet-webhook", false, "instead of the scenario, time -probes creates per probe mode with one replica, no workload and -shelves Shelves")
	floor := flag.Bool("floor", false, "instead of the scenario, time the label writes that 1 -> 3 makes, with nothing of Loom running")
	apiArgs := flag.String("apiserver-args", "", "extra kube-apiserver flags, space-separated (such as --profiling=true)")
	keep := flag.Bool("keep", false, "keep the replicas' logs and heap profiles (their directory is printed); the profiles sample every 4 KB")
	cpu := flag.Bool("cpu", false, "report the CPU time each process used during each step, until caught up")
	profileDir := flag.String("apiserver-profile", "", "write a CPU profile of kube-apiserver for each step into this folder (turns on its --profiling)")
	driverProfile := flag.String("driver-profile", "", "write a CPU profile of this driver (not the replicas) to this file")
	flag.Parse()
	if *driverProfile != "" {
		f, err := os.Create(*driverProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	out := io.Writer(os.Stdout)
	if *outPath != "" {
		f, err := os.OpenFile(*outPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		out = io.MultiWriter(os.Stdout, f)
		switch {
		case *overhead:
			fmt.Fprintf(f, "# %s: -overhead\n", time.Now().UTC().Format(time.RFC3339))
		case *quiet:
			fmt.Fprintf(f, "# %s: -quiet-webhook -shelves %d -probes %d\n", time.Now().UTC().Format(time.RFC3339), *shelves, *probes)
		case *floor:
			fmt.Fprintf(f, "# %s: -floor -shelves %d -rate %d\n", time.Now().UTC().Format(time.RFC3339), *shelves, *rate)
		default:
			fmt.Fprintf(f, "# %s: -shelves %d -rate %d -probes %d\n", time.Now().UTC().Format(time.RFC3339), *shelves, *rate, *probes)
		}
	}
	if *overhead {
		if _, err := Overhead(context.Background(), []int{1000, 10000, 1000, 10000}, func(f string, a ...any) { fmt.Fprintf(out, f, a...) }); err != nil {
			fmt.Fprintln(os.Stderr, "sharding:", err)
			os.Exit(1)
		}
		return
	}
	if *floor {
		_, err := Floor(context.Background(), FloorOptions{Shelves: *shelves, UpdateRate: *rate, Concurrency: []int{48, 256}}, func(f string, a ...any) { fmt.Fprintf(out, f, a...) })
		if err != nil {
			fmt.Fprintln(os.Stderr, "sharding:", err)
			os.Exit(1)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "loom-sharding-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *keep {
		fmt.Fprintln(os.Stderr, "replica logs and heap profiles in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if *quiet {
		if _, err := QuietWebhook(context.Background(), Options{Shelves: *shelves, ProbeCreates: *probes, Exe: exe, Dir: dir, Out: out, APIServerArgs: strings.Fields(*apiArgs)}); err != nil {
			fmt.Fprintln(os.Stderr, "sharding:", err)
			os.Exit(1)
		}
		return
	}
	opts := Options{Shelves: *shelves, UpdateRate: *rate, ProbeCreates: *probes, Exe: exe, Dir: dir, Out: out, APIServerArgs: strings.Fields(*apiArgs)}
	if *keep {
		opts.MemProfileRate = 4096
	}
	opts.CPU = *cpu
	if *profileDir != "" {
		opts.ProfileDir = *profileDir
		opts.APIServerArgs = append(opts.APIServerArgs, "--profiling=true")
	}
	rep, err := Run(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharding:", err)
		os.Exit(1)
	}
	if len(rep.Overlaps) > 0 {
		os.Exit(1)
	}
}
