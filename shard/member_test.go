package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped after the last.
var shared = testenv.Shared{Options: testenv.Options{}}

func TestMain(m *testing.M) { shared.Main(m) }

func leaseClient(t *testing.T, host string) *client.Client[*coordinationv1.Lease] {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		cfg.Host = host
	}
	cfg.Timeout = 2 * time.Second
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	c, err := client.For[coordinationv1.Lease](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func run(t *testing.T, start func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	stopped := false
	var err error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestMembership: replicas join the ring by creating their Leases, and a
// replica that stops deletes its Lease, leaves the ring at once and
// refuses fenced writes.
func TestMembership(t *testing.T) {
	leases := leaseClient(t, "")
	members, err := NewMembers(leases, MembersOptions{Ring: "join", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, members.Start)
	changes := members.Changes()
	mopts := MemberOptions{Ring: "join", Namespace: "default", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
	var ms []*Member
	var stops []func() error
	for _, id := range []string{"a", "b"} {
		o := mopts
		o.Identity = id
		m, err := NewMember(leases, o)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		stops = append(stops, run(t, m.Start))
	}
	ring := func(want ...string) func() bool {
		return func() bool { return slices.Equal(members.Ring().Members(), want) }
	}
	eventually(t, "both replicas in the ring", ring("a", "b"))
	select {
	case <-changes:
	default:
		t.Error("no change was signalled")
	}
	l, err := leases.Namespace("default").Get(t.Context(), "join-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Labels[RingLabel] != "join" || *l.Spec.HolderIdentity != "a" {
		t.Errorf("lease labels %v, holder %q", l.Labels, *l.Spec.HolderIdentity)
	}
	eventually(t, "a renewal", func() bool {
		l2, err := leases.Namespace("default").Get(t.Context(), "join-a", metav1.GetOptions{})
		return err == nil && l2.Spec.RenewTime.After(l.Spec.RenewTime.Time)
	})
	if _, done, err := ms[0].Enter(); err != nil {
		t.Errorf("a live shard's fence refused a write: %v", err)
	} else {
		done()
	}

	if err := stops[0](); err != nil {
		t.Fatalf("Start returned %v after its context ended", err)
	}
	if _, err := leases.Namespace("default").Get(t.Context(), "join-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the lease of a replica that left: %v, want NotFound", err)
	}
	eventually(t, "the ring without the replica that left", ring("b"))
	if _, _, err := ms[0].Enter(); !errors.Is(err, ErrShardLost) {
		t.Errorf("the fence of a replica that left: %v, want ErrShardLost", err)
	}
}

// TestExpiry: a Lease that is not renewed drops out of the ring after its
// duration, by the watcher's own clock; a renewal brings it back.
func TestExpiry(t *testing.T) {
	leases := leaseClient(t, "").Namespace("default")
	fake := clock.NewFake(time.Now())
	members, err := NewMembers(leases, MembersOptions{Ring: "expiry", Namespace: "default", clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	run(t, members.Start)
	ghost, dur := "ghost", int32(10)
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour)) // the clocks of others are never compared
	l, err := leases.Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "expiry-ghost", Labels: map[string]string{RingLabel: "expiry"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &ghost, LeaseDurationSeconds: &dur, RenewTime: &old},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ghost in the ring", func() bool { return members.Live("ghost") })
	fake.Step(9 * time.Second)
	if !members.Live("ghost") {
		t.Fatal("the ghost left before its lease duration")
	}
	fake.Step(2 * time.Second)
	eventually(t, "the ghost to expire", func() bool { return !members.Live("ghost") })

	renewed := metav1.NewMicroTime(old.Add(time.Second))
	l.Spec.RenewTime = &renewed
	if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the renewed ghost back in the ring", func() bool { return members.Live("ghost") })
}

// TestExpiryOnTime: a Lease drops out of the ring at the moment it
// expires by the watcher's clock, not at the next of its once-a-second
// checks. The Lease is first seen half a second after the checks began,
// so it expires between two of them.
func TestExpiryOnTime(t *testing.T) {
	leases := leaseClient(t, "").Namespace("default")
	fake := clock.NewFake(time.Now())
	members, err := NewMembers(leases, MembersOptions{Ring: "on-time", Namespace: "default", clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	run(t, members.Start)
	armed := func(what string) {
		t.Helper()
		eventually(t, what, func() bool { return fake.Waiters() > 0 })
	}
	armed("the first check armed")
	fake.Step(500 * time.Millisecond) // no check due yet
	ghost, dur := "ghost", int32(10)
	now := metav1.NewMicroTime(time.Now())
	if _, err := leases.Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "on-time-ghost", Labels: map[string]string{RingLabel: "on-time"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &ghost, LeaseDurationSeconds: &dur, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ghost in the ring", func() bool { return members.Live("ghost") })
	fake.Step(500 * time.Millisecond) // the check at 1 s
	armed("the check after 1 s armed")
	for i := 2; i <= 10; i++ { // the checks at 2, 3, ... 10 s
		fake.Step(time.Second)
		armed(fmt.Sprintf("the check after %d s armed", i))
	}
	if !members.Live("ghost") {
		t.Fatal("the ghost left before its lease duration")
	}
	fake.Step(500 * time.Millisecond) // 10.5 s: 10 s after it was seen
	eventually(t, "the ghost to expire at 10.5 s", func() bool { return !members.Live("ghost") })
}

// TestMemberLost: a replica that cannot write its Lease gives up after
// RenewDeadline with ErrShardLost, and its fence refuses writes.
func TestMemberLost(t *testing.T) {
	leases := leaseClient(t, "https://127.0.0.1:1") // nothing listens there
	m, err := NewMember(leases, MemberOptions{Ring: "lost", Namespace: "default", Identity: "a",
		LeaseDuration: 3 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start(t.Context())
	if !errors.Is(err, ErrShardLost) {
		t.Fatalf("Start: %v, want ErrShardLost", err)
	}
	if _, _, err := m.Enter(); !errors.Is(err, ErrShardLost) {
		t.Errorf("fence: %v, want ErrShardLost", err)
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name, ring, identity string
	}{
		{"no ring", "", "a"},
		{"ring with a slash", "a/b", "a"},
		{"ring too long for a label", "r234567890123456789012345678901234567890123456789012345678901234", "a"},
		{"identity with a slash", "ring", "a/b"},
		{"identity in upper case (not a Lease name)", "ring", "Replica"},
		{"identity too long for a label value", "ring", "a234567890123456789012345678901234567890123456789012345678901234"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMember(&client.Client[*coordinationv1.Lease]{}, MemberOptions{Ring: tc.ring, Namespace: "default", Identity: tc.identity})
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("NewMember: %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := NewMember(&client.Client[*coordinationv1.Lease]{}, MemberOptions{Ring: "ring", Namespace: "default", Identity: "replica-0"}); err != nil {
		t.Errorf("valid options: %v", err)
	}
	if id := DefaultIdentity(); validate("ring", id) != nil {
		t.Errorf("DefaultIdentity %q is not valid: %v", id, validate("ring", id))
	}
}
