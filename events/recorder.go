package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/rest"
)

// Options configure [New]. Controller is required.
type Options struct {
	// Controller is the reporting controller, such as
	// "example.com/widget-controller".
	Controller string
	// Instance is the reporting instance. Default: the host name.
	Instance string
	// Scheme names the kinds of custom types whose objects carry no
	// apiVersion and kind (objects from a cache). Nil means built-in types
	// only (and objects whose kind is set).
	Scheme *runtime.Scheme
	// Window is how long a repeated event updates the first one's series
	// instead of creating a new Event. Zero means ten minutes.
	Window time.Duration
	// Similar is how many events that differ only in their note may be
	// written within Window before the rest are combined into one Event
	// ("(combined from similar events): <note>"), counted in its series.
	// Zero means 10.
	Similar int
	// Burst and RefillEvery configure the per-object spam filter: at most
	// Burst events at once, then one per RefillEvery. Zero means 25 and
	// five minutes.
	Burst       int
	RefillEvery time.Duration
	// Buffer is how many events may wait to be sent. Zero means 1000.
	Buffer int
	// Logger receives every event at debug level, and send failures. Nil
	// means discard.
	Logger *slog.Logger

	clock clock.Clock // tests only
}

// Recorder records events. It is safe for concurrent use.
type Recorder struct {
	opts   Options
	log    *slog.Logger
	clock  clock.Clock
	queue  chan *pending // pointers: a full buffer of values would take 192 KB
	newAPI *client.Client[*eventsv1.Event]
	oldAPI *client.Client[*corev1.Event]

	dropped atomic.Int64
	mu      sync.Mutex
	series  map[seriesKey]*seriesState // exact repeats, and combined events under similarity keys
	similar map[seriesKey]*similarState
	buckets map[types.UID]*bucket
	useCore bool
	swept   time.Time // when the maps were last swept of expired entries
}

type pending struct {
	ref         corev1.ObjectReference
	typ, reason string
	note        string
	annotations map[string]string
	at          time.Time
}

type seriesKey struct {
	uid          types.UID
	typ, reason  string
	namespace    string
	name         string
	kind, apiVer string
	note         string // empty in a similarity key
}

type seriesState struct {
	name  string // the Event object's name
	ns    string
	count int32
	first time.Time
	last  time.Time
	core  bool
}

// similarState counts events that differ only in their note.
type similarState struct {
	first time.Time
	notes int
}

type bucket struct {
	tokens float64
	at     time.Time
}

// New returns a Recorder that writes events through rc. Call Start to send.
func New(rc *rest.Client, opts Options) (*Recorder, error) {
	if opts.Controller == "" {
		return nil, errors.New("events: Options.Controller is required")
	}
	if opts.Instance == "" {
		opts.Instance, _ = os.Hostname()
	}
	if opts.Window <= 0 {
		opts.Window = 10 * time.Minute
	}
	if opts.Similar <= 0 {
		opts.Similar = 10
	}
	if opts.Burst <= 0 {
		opts.Burst = 25
	}
	if opts.RefillEvery <= 0 {
		opts.RefillEvery = 5 * time.Minute
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 1000
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	newAPI, err := client.For[eventsv1.Event](rc, client.Options{})
	if err != nil {
		return nil, err
	}
	oldAPI, err := client.For[corev1.Event](rc, client.Options{})
	if err != nil {
		return nil, err
	}
	return &Recorder{
		opts: opts, log: log.With("controller", opts.Controller), clock: clock.OrReal(opts.clock),
		queue: make(chan *pending, opts.Buffer), newAPI: newAPI, oldAPI: oldAPI,
		series: map[seriesKey]*seriesState{}, similar: map[seriesKey]*similarState{}, buckets: map[types.UID]*bucket{},
	}, nil
}

// Event records an event about regarding. eventType is corev1.EventTypeNormal
// or corev1.EventTypeWarning; reason is a short CamelCase cause.
func (r *Recorder) Event(regarding runtime.Object, eventType, reason, note string) {
	r.record(regarding, nil, eventType, reason, note)
}

// Eventf is Event with a formatted note.
func (r *Recorder) Eventf(regarding runtime.Object, eventType, reason, format string, args ...any) {
	r.record(regarding, nil, eventType, reason, fmt.Sprintf(format, args...))
}

// AnnotatedEventf is Eventf that also sets annotations on the Event.
func (r *Recorder) AnnotatedEventf(regarding runtime.Object, annotations map[string]string, eventType, reason, format string, args ...any) {
	r.record(regarding, annotations, eventType, reason, fmt.Sprintf(format, args...))
}

// Dropped returns how many events were dropped: buffer full, spam filter,
// or refused by the server.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

func (r *Recorder) record(obj runtime.Object, annotations map[string]string, typ, reason, note string) {
	ref, err := r.reference(obj)
	if err != nil {
		r.log.Warn("cannot record an event", "reason", reason, "err", err)
		r.dropped.Add(1)
		return
	}
	r.log.Debug("event", "type", typ, "reason", reason, "object", ref.Kind+"/"+ref.Namespace+"/"+ref.Name, "note", note)
	if len(note) > 1024 {
		note = note[:1024] // events.k8s.io/v1 limits the note to 1 kB
	}
	select {
	case r.queue <- &pending{ref: ref, typ: typ, reason: reason, note: note, annotations: annotations, at: r.clock.Now()}:
	default:
		r.dropped.Add(1)
	}
}

// reference builds the ObjectReference of obj.
func (r *Recorder) reference(obj runtime.Object) (corev1.ObjectReference, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return corev1.ObjectReference{}, fmt.Errorf("events: %T has no object metadata", obj)
	}
	ref, err := client.ReferenceTo(o, r.opts.Scheme)
	if err != nil {
		return ref, fmt.Errorf("events: %w (or set Options.Scheme)", err)
	}
	return ref, nil
}

// Start sends recorded events until ctx ends. It returns nil then; events
// still buffered are dropped.
func (r *Recorder) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-r.queue:
			r.send(ctx, *p)
		}
	}
}

// allow applies the spam filter for one object.
func (r *Recorder) allow(uid types.UID, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[uid]
	if b == nil {
		b = &bucket{tokens: float64(r.opts.Burst), at: now}
		r.buckets[uid] = b
	}
	b.tokens += now.Sub(b.at).Seconds() / r.opts.RefillEvery.Seconds()
	if b.tokens > float64(r.opts.Burst) {
		b.tokens = float64(r.opts.Burst)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (r *Recorder) send(ctx context.Context, p pending) {
	r.sweep(p.at)
	if !r.allow(p.ref.UID, p.at) {
		r.dropped.Add(1)
		return
	}
	sim := seriesKey{uid: p.ref.UID, typ: p.typ, reason: p.reason, namespace: p.ref.Namespace, name: p.ref.Name, kind: p.ref.Kind, apiVer: p.ref.APIVersion}
	key := sim
	key.note = p.note
	r.mu.Lock()
	s := r.live(key, p.at)
	if s == nil {
		// A new note: after Similar of them within Window, the rest are
		// combined into one Event, kept under the similarity key.
		st := r.similar[sim]
		if st == nil || p.at.Sub(st.first) > r.opts.Window {
			st = &similarState{first: p.at}
			r.similar[sim] = st
		}
		st.notes++
		if st.notes > r.opts.Similar {
			key = sim
			s = r.live(key, p.at)
			p.note = "(combined from similar events): " + p.note
		}
	}
	r.mu.Unlock()
	var err error
	if s == nil {
		s, err = r.create(ctx, p)
		if err == nil {
			r.mu.Lock()
			r.series[key] = s
			r.mu.Unlock()
		}
	} else {
		err = r.bump(ctx, s, p)
	}
	if err != nil && ctx.Err() == nil {
		r.dropped.Add(1)
		r.log.Warn("could not write an event", "reason", p.reason, "err", err)
	}
}

// sweep drops, at most once per Window, what no longer counts: series
// and similarity counts that started more than Window ago, and spam-filter
// buckets that have refilled (a new bucket would be the same). The maps
// then hold only the objects that had events recently, however long the
// recorder runs.
func (r *Recorder) sweep(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.swept) < r.opts.Window {
		return
	}
	r.swept = now
	maps.DeleteFunc(r.series, func(_ seriesKey, s *seriesState) bool { return now.Sub(s.first) > r.opts.Window })
	maps.DeleteFunc(r.similar, func(_ seriesKey, s *similarState) bool { return now.Sub(s.first) > r.opts.Window })
	maps.DeleteFunc(r.buckets, func(_ types.UID, b *bucket) bool {
		return b.tokens+now.Sub(b.at).Seconds()/r.opts.RefillEvery.Seconds() >= float64(r.opts.Burst)
	})
}

// sizes returns how many series, similarity counts and buckets the
// recorder holds (for tests).
func (r *Recorder) sizes() (series, similar, buckets int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.series), len(r.similar), len(r.buckets)
}

// live returns the series under key if it started within Window. r.mu is
// held.
func (r *Recorder) live(key seriesKey, at time.Time) *seriesState {
	s := r.series[key]
	if s != nil && at.Sub(s.first) > r.opts.Window {
		delete(r.series, key)
		return nil
	}
	return s
}

// eventNamespace is where the Event lives: the object's namespace, or
// "default" for cluster-scoped objects.
func eventNamespace(ref corev1.ObjectReference) string {
	if ref.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return ref.Namespace
}

func (r *Recorder) eventName(ref corev1.ObjectReference, at time.Time) string {
	return ref.Name + "." + strconv.FormatInt(at.UnixNano(), 16)
}

// create writes a new Event, as events.k8s.io/v1 or, if the server does
// not serve it, core/v1.
func (r *Recorder) create(ctx context.Context, p pending) (*seriesState, error) {
	ns := eventNamespace(p.ref)
	s := &seriesState{name: r.eventName(p.ref, p.at), ns: ns, count: 1, first: p.at, last: p.at}
	r.mu.Lock()
	core := r.useCore
	r.mu.Unlock()
	if !core {
		_, err := r.newAPI.Namespace(ns).Create(ctx, &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: s.name, Namespace: ns, Annotations: p.annotations},
			EventTime:           metav1.NewMicroTime(p.at),
			ReportingController: r.opts.Controller,
			ReportingInstance:   r.opts.Instance,
			Action:              p.reason,
			Reason:              p.reason,
			Regarding:           p.ref,
			Note:                p.note,
			Type:                p.typ,
		}, metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) || !isMissingAPI(err) {
			return s, err
		}
		r.log.Info("server has no events.k8s.io/v1; writing core/v1 events")
		r.mu.Lock()
		r.useCore = true
		r.mu.Unlock()
	}
	s.core = true
	_, err := r.oldAPI.Namespace(ns).Create(ctx, &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: s.name, Namespace: ns, Annotations: p.annotations},
		InvolvedObject:      p.ref,
		Reason:              p.reason,
		Message:             p.note,
		Type:                p.typ,
		FirstTimestamp:      metav1.NewTime(p.at),
		LastTimestamp:       metav1.NewTime(p.at),
		Count:               1,
		Source:              corev1.EventSource{Component: r.opts.Controller, Host: r.opts.Instance},
		ReportingController: r.opts.Controller,
		ReportingInstance:   r.opts.Instance,
	}, metav1.CreateOptions{})
	return s, err
}

// isMissingAPI tells a 404 for the whole resource (no such API) from a 404
// for a missing namespace.
func isMissingAPI(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	d := se.Status().Details
	return d == nil || d.Kind != "namespaces"
}

// bump records one more occurrence in the series of an existing Event.
func (r *Recorder) bump(ctx context.Context, s *seriesState, p pending) error {
	s.count++
	s.last = p.at
	var patch string
	if s.core {
		patch = fmt.Sprintf(`{"count":%d,"lastTimestamp":%q,"message":%q}`, s.count, metav1.NewTime(p.at).UTC().Format(time.RFC3339), p.note)
		_, err := r.oldAPI.Namespace(s.ns).Patch(ctx, s.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	// The note of an events.k8s.io/v1 Event cannot change: only the series.
	patch = fmt.Sprintf(`{"series":{"count":%d,"lastObservedTime":%q}}`, s.count, p.at.UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
	_, err := r.newAPI.Namespace(s.ns).Patch(ctx, s.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}
