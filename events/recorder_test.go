package events_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/events"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped after the last.
var shared = testenv.Shared{Options: testenv.Options{}}

func TestMain(m *testing.M) { shared.Main(m) }

// exampleEnv is the shared control plane for examples, which have no t.
func exampleEnv() *testenv.Env {
	env, err := shared.Start()
	if err != nil {
		panic(err)
	}
	return env
}

func restFor(t *testing.T, e *testenv.Env) *rest.Client {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: e.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	return rc
}

// subject creates a ConfigMap to record events about; it is read back
// from the server, so it has a UID but no apiVersion and kind, as objects
// from a cache.
func subject(t *testing.T, rc *rest.Client, name string) *corev1.ConfigMap {
	t.Helper()
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cm, err := cms.Namespace("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.TypeMeta = metav1.TypeMeta{}
	return cm
}

func startRecorder(t *testing.T, rc *rest.Client, opts events.Options) *events.Recorder {
	t.Helper()
	opts.Controller = "loom.dev/test"
	rec, err := events.New(rc, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- rec.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return rec
}

// eventually polls cond for up to a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func eventsAbout(t *testing.T, rc *rest.Client, name string) []*eventsv1.Event {
	t.Helper()
	evs, _ := client.For[eventsv1.Event](rc, client.Options{})
	l, err := evs.Namespace("default").List(t.Context(), metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func TestEventsAreAggregated(t *testing.T) {
	rc := restFor(t, shared.Env(t))
	cm := subject(t, rc, "aggregated")
	rec := startRecorder(t, rc, events.Options{})
	for range 5 {
		rec.Event(cm, corev1.EventTypeWarning, "Flapping", "probe failed")
	}
	rec.Event(cm, corev1.EventTypeNormal, "Synced", "all good")
	// 12 events that differ only in their note: 10 as they are, then one
	// combined event counting the other 2.
	for i := range 12 {
		rec.Eventf(cm, corev1.EventTypeWarning, "Retrying", "attempt %d failed", i)
	}
	var got []*eventsv1.Event
	eventually(t, "1 Flapping event with a series of 5, 1 Synced, 10 Retrying and 1 combined with a series of 2", func() bool {
		got = eventsAbout(t, rc, "aggregated")
		flap, synced, retry, combined := 0, 0, 0, 0
		for _, e := range got {
			switch {
			case e.Reason == "Flapping" && e.Series != nil && e.Series.Count == 5 && e.Note == "probe failed":
				flap++
			case e.Reason == "Synced" && e.Series == nil:
				synced++
			case e.Reason == "Retrying" && e.Series == nil && !contains(e.Note, "combined"):
				retry++
			case e.Reason == "Retrying" && e.Series != nil && e.Series.Count == 2 && e.Note == "(combined from similar events): attempt 10 failed":
				combined++
			}
		}
		return flap == 1 && synced == 1 && retry == 10 && combined == 1 && len(got) == 13
	})
	if rec.Dropped() != 0 {
		t.Fatalf("%d events dropped", rec.Dropped())
	}
	e := got[0]
	if e.Regarding.Kind != "ConfigMap" || e.Regarding.APIVersion != "v1" || e.Regarding.UID != cm.UID || e.ReportingController != "loom.dev/test" {
		t.Fatalf("regarding %+v, controller %q", e.Regarding, e.ReportingController)
	}
	// kubectl, an independent client, shows them.
	out, err := execKubectl(t, "events", "--for", "configmap/aggregated")
	if err != nil || !contains(out, "Flapping") || !contains(out, "probe failed") {
		t.Fatalf("kubectl events: %v\n%s", err, out)
	}
}

func TestSpamFilter(t *testing.T) {
	rc := restFor(t, shared.Env(t))
	cm := subject(t, rc, "spammy")
	rec := startRecorder(t, rc, events.Options{Burst: 3})
	for i := range 10 {
		rec.Eventf(cm, corev1.EventTypeNormal, fmt.Sprintf("Reason%d", i), "distinct event %d", i)
	}
	eventually(t, "7 events dropped", func() bool { return rec.Dropped() == 7 })
	eventually(t, "3 events written", func() bool { return len(eventsAbout(t, rc, "spammy")) == 3 })
}

func TestFallsBackToCoreEvents(t *testing.T) {
	old := testenv.New(t, testenv.Options{APIServerArgs: []string{"--runtime-config=events.k8s.io/v1=false"}})
	rc := restFor(t, old)
	cm := subject(t, rc, "legacy")
	rec := startRecorder(t, rc, events.Options{})
	for range 3 {
		rec.Event(cm, corev1.EventTypeNormal, "Legacy", "written as core/v1")
	}
	core, _ := client.For[corev1.Event](rc, client.Options{})
	eventually(t, "one core/v1 event with count 3", func() bool {
		l, err := core.Namespace("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=legacy"})
		return err == nil && len(l.Items) == 1 && l.Items[0].Count == 3 && l.Items[0].Reason == "Legacy"
	})
	if rec.Dropped() != 0 {
		t.Fatalf("%d events dropped", rec.Dropped())
	}
}
