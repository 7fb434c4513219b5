package main

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	maybeReplica()
	os.Exit(m.Run())
}

// TestShardingScenario is the reduced form of the scenario (go run
// ./sharding runs the full one): 400 Shelves instead of 5,000, the same
// sequence and invariants. Replicas are separate processes (this test
// binary, re-executed). Every step must settle (every object on its shard,
// every change reconciled by its shard) within a generous bound; the times
// are reported, not asserted. No Shelf may be reconciled by two replicas
// at once; each replica must cache 0.8-1.25 of a fair share; adding
// replicas must move at most 1.3 k/(N+k) of the Shelves. New Shelves must
// come back from their create labelled when the assignment webhook is on,
// and not when it is off (the leader's watch labels them after) or the
// no-op webhook is on (served by a replica or by the driver).
func TestShardingScenario(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), Options{Shelves: 400, UpdateRate: 20, ProbeCreates: 40, Exe: exe, Dir: t.TempDir(), Out: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Overlaps) > 0 {
		t.Errorf("%d overlapping reconciles, such as %s", len(rep.Overlaps), rep.Overlaps[0])
	}
	for _, p := range rep.Probes {
		switch {
		case p.Mode == "watch" && p.LabelledAtCreate != 0:
			t.Errorf("%d of %d creates labelled at create with the webhook off", p.LabelledAtCreate, p.Creates)
		case (p.Mode == "noop" || p.Mode == "drvnoop") && p.LabelledAtCreate != 0:
			t.Errorf("%d of %d creates labelled at create with the no-op webhook", p.LabelledAtCreate, p.Creates)
		case p.Mode == "webhook" && p.LabelledAtCreate == 0:
			t.Errorf("no create of %d labelled at create by the webhook", p.Creates)
		}
		if p.Mode != "watch" && p.WebhookCalls == 0 {
			t.Errorf("the API server reports no call to the %s webhook", p.Mode)
		}
	}
	if want := 2 * len(probeModes); len(rep.Probes) != want {
		t.Errorf("%d probes reported, want %d (%d modes, with and without the workload's updates)", len(rep.Probes), want, len(probeModes))
	}
	if len(rep.Steps) != 5 {
		t.Fatalf("%d steps reported, want 5", len(rep.Steps))
	}
	for _, s := range rep.Steps {
		for _, u := range s.Unbalanced {
			t.Errorf("%s: %s", s.Name, u)
		}
		if s.MoveBound > 0 && s.Moved > s.MoveBound {
			t.Errorf("%s: moved %.3f of the Shelves, more than %.3f", s.Name, s.Moved, s.MoveBound)
		}
		total := 0
		for _, h := range s.Heaps {
			total += h.Shelves
		}
		if total != 400 {
			t.Errorf("%s: the replicas cache %d Shelves in all, want 400", s.Name, total)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestFloor runs the floor's rounds on a few Shelves: every label write
// must land (each round's writes test what the round before wrote), the
// workload must write (Floor fails when it makes no write in a minute)
// and only in its rounds, and the lists by bucket must find exactly the
// objects that move.
func TestFloor(t *testing.T) {
	rounds, err := Floor(t.Context(), FloorOptions{Shelves: 30, UpdateRate: 20, Concurrency: []int{4}}, func(f string, a ...any) { t.Logf(f, a...) })
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 3 {
		t.Fatalf("%d rounds, want 3 (writes with the workload off, then on; then the lists by bucket)", len(rounds))
	}
	if got, want := rounds[2].Listed, rounds[0].Writes; got != want {
		t.Errorf("the new shards listed %d objects by bucket, want the %d that move", got, want)
	}
	for _, r := range rounds[:2] {
		if r.Writes == 0 || r.Writes%3 != 0 {
			t.Errorf("%d label writes in a round, want a Shelf and its two ConfigMaps for each Shelf that moves", r.Writes)
		}
		if !r.Workload && r.WorkloadWrites > 0 {
			t.Errorf("the workload wrote %d times during a round without it", r.WorkloadWrites)
		}
	}
}

// TestQuietWebhook measures the webhooks on a quiet control plane with a
// few Shelves: a probe per mode and no other, each with its creates; the
// assignment webhook labels creates and the others none; the API server
// reports calls to each webhook. (A call may time out on a loaded
// machine, and the create then passes unlabelled, so the test does not
// ask for every one.)
func TestQuietWebhook(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	probes, err := QuietWebhook(t.Context(), Options{Shelves: 20, ProbeCreates: 10, Exe: exe, Dir: t.TempDir(), Out: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != len(probeModes) {
		t.Fatalf("%d probes reported, want %d", len(probes), len(probeModes))
	}
	for _, p := range probes {
		if p.Creates != 10 {
			t.Errorf("%s: %d creates, want 10", p.Mode, p.Creates)
		}
		if labels := p.Mode == "webhook"; labels != (p.LabelledAtCreate > 0) {
			t.Errorf("%s: %d of %d creates labelled at create", p.Mode, p.LabelledAtCreate, p.Creates)
		}
		if p.Mode != "watch" && p.WebhookCalls == 0 {
			t.Errorf("%s: the API server reports no call to the webhook", p.Mode)
		}
	}
}
