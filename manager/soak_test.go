package manager_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
)

// The soak test runs the parts of a controller that keep state per object
// (the informer and its handlers, the controller's queue, the
// read-your-writes client, the event recorder, a CRD gate whose runnable
// keeps failing) through 10⁶ changes to 10⁵ distinct objects, each
// created, updated and deleted, on synctest's clock, over hours of
// simulated time. Memory and goroutines must stay flat once warmed up:
// anything kept per object ever seen, rather than per object alive, would
// grow a hundredfold over the run.
//
// The API server is played by soakAPI, in memory: what is tested is Loom's
// own bookkeeping, not the server's semantics (the other tests use a real
// one). The informer reads the objects straight from it; the writes of the
// read-your-writes client and of the recorder, and the CRD gate's list and
// watch, go through Loom's REST client to soakAPI as an http.RoundTripper.

const (
	soakNamespace = "soak"
	soakCRD       = "soaks.example.com"
)

// soakAPI holds ConfigMaps and fans their changes out to watchers.
type soakAPI struct {
	mu       sync.Mutex
	rv       int64
	objs     map[string]*corev1.ConfigMap
	watchers map[*soakWatch]struct{}
	requests atomic.Int64
}

func newSoakAPI() *soakAPI {
	return &soakAPI{objs: map[string]*corev1.ConfigMap{}, watchers: map[*soakWatch]struct{}{}}
}

// apply makes one change and tells every watcher. It returns the object as
// stored, or an error code (404, 409).
func (s *soakAPI) apply(typ watch.EventType, obj *corev1.ConfigMap) (*corev1.ConfigMap, int) {
	s.mu.Lock()
	cur, exists := s.objs[obj.Name]
	switch {
	case typ == watch.Added && exists:
		s.mu.Unlock()
		return nil, http.StatusConflict
	case typ != watch.Added && !exists:
		s.mu.Unlock()
		return nil, http.StatusNotFound
	case typ == watch.Modified && obj.ResourceVersion != "" && obj.ResourceVersion != cur.ResourceVersion:
		s.mu.Unlock()
		return nil, http.StatusConflict
	}
	s.rv++
	out := obj.DeepCopy()
	out.Namespace, out.ResourceVersion = soakNamespace, strconv.FormatInt(s.rv, 10)
	if exists {
		out.UID = cur.UID
	} else {
		out.UID = types.UID("uid-" + out.ResourceVersion)
	}
	if typ == watch.Deleted {
		out = cur.DeepCopy()
		out.ResourceVersion = strconv.FormatInt(s.rv, 10)
		delete(s.objs, obj.Name)
	} else {
		s.objs[obj.Name] = out
	}
	watchers := make([]*soakWatch, 0, len(s.watchers))
	for w := range s.watchers {
		watchers = append(watchers, w)
	}
	s.mu.Unlock()
	for _, w := range watchers {
		select {
		case w.ch <- rest.Event[*corev1.ConfigMap]{Type: typ, Object: out.DeepCopy()}:
		case <-w.stop:
		}
	}
	return out, 0
}

// list answers a LIST of ConfigMaps.
func (s *soakAPI) list(req *http.Request) *http.Response {
	s.mu.Lock()
	l := corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(s.rv, 10)}}
	for _, o := range s.objs {
		l.Items = append(l.Items, *o)
	}
	b, _ := json.Marshal(&l)
	s.mu.Unlock()
	return soakResponse(req, http.StatusOK, b)
}

// watch answers a WATCH of ConfigMaps: the changes from now on, as JSON
// events, until the request's timeoutSeconds or its end. (It does not
// replay from the resourceVersion asked for: the soak test writes nothing
// between the informer's list and its watch.)
func (s *soakAPI) watch(req *http.Request) *http.Response {
	q := req.URL.Query()
	if q.Get("sendInitialEvents") == "true" {
		return soakStatus(req, http.StatusBadRequest) // the reflector falls back to lists
	}
	timeout, _ := strconv.Atoi(q.Get("timeoutSeconds"))
	w := &soakWatch{ch: make(chan rest.Event[*corev1.ConfigMap], 64), stop: make(chan struct{})}
	s.mu.Lock()
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	pr, pw := io.Pipe()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.watchers, w)
			s.mu.Unlock()
			close(w.stop)
			pw.Close()
		}()
		t := time.NewTimer(time.Duration(max(timeout, 1)) * time.Second)
		defer t.Stop()
		enc := json.NewEncoder(pw)
		for {
			select {
			case ev := <-w.ch:
				if err := enc.Encode(map[string]any{"type": ev.Type, "object": ev.Object}); err != nil {
					return // the client went away
				}
			case <-t.C:
				return
			case <-req.Context().Done():
				return
			}
		}
	}()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: pr, Request: req}
}

// soakWatch is one watch's queue of events.
type soakWatch struct {
	ch   chan rest.Event[*corev1.ConfigMap]
	stop chan struct{} // closed when the watch has ended
}

// RoundTrip answers the requests of Loom's REST client: ConfigMap writes,
// Event writes, and the CRD gate's list and watch of its CRD.
func (s *soakAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	s.requests.Add(1)
	p := req.URL.Path
	switch {
	case strings.HasPrefix(p, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"):
		return s.crd(req)
	case strings.HasPrefix(p, "/apis/events.k8s.io/v1/namespaces/"+soakNamespace+"/events"):
		body, _ := io.ReadAll(req.Body)
		if req.Method == http.MethodPost {
			return soakResponse(req, http.StatusCreated, body), nil
		}
		return soakResponse(req, http.StatusOK, []byte(`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{}}`)), nil
	case p == "/api/v1/namespaces/"+soakNamespace+"/configmaps" && req.Method == http.MethodGet:
		if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
			return s.watch(req), nil
		}
		return s.list(req), nil
	case strings.HasPrefix(p, "/api/v1/namespaces/"+soakNamespace+"/configmaps"):
		var in corev1.ConfigMap
		typ := watch.Deleted
		switch req.Method {
		case http.MethodPost, http.MethodPut:
			if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
				return soakStatus(req, http.StatusBadRequest), nil
			}
			typ = watch.Added
			if req.Method == http.MethodPut {
				typ = watch.Modified
			}
		case http.MethodDelete:
			in.Name = p[strings.LastIndex(p, "/")+1:]
		default:
			return soakStatus(req, http.StatusMethodNotAllowed), nil
		}
		out, code := s.apply(typ, &in)
		if code != 0 {
			return soakStatus(req, code), nil
		}
		b, _ := json.Marshal(out)
		return soakResponse(req, http.StatusOK, b), nil
	}
	return soakStatus(req, http.StatusNotFound), nil
}

const soakCRDJSON = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",` +
	`"metadata":{"name":"` + soakCRD + `","resourceVersion":"1"},` +
	`"status":{"conditions":[{"type":"Established","status":"True"}]}}`

// crd serves the one CRD: a list, or a watch that delivers nothing until
// its timeout or its request ends.
func (s *soakAPI) crd(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if q.Get("watch") != "true" && q.Get("watch") != "1" {
		return soakResponse(req, http.StatusOK, []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinitionList","metadata":{"resourceVersion":"1"},"items":[`+soakCRDJSON+`]}`)), nil
	}
	pr, pw := io.Pipe()
	timeout, _ := strconv.Atoi(q.Get("timeoutSeconds"))
	go func() {
		if q.Get("sendInitialEvents") == "true" {
			fmt.Fprintf(pw, `{"type":"ADDED","object":%s}`+"\n", soakCRDJSON)
			fmt.Fprintln(pw, `{"type":"BOOKMARK","object":{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}`)
		}
		t := time.NewTimer(time.Duration(max(timeout, 1)) * time.Second)
		defer t.Stop()
		select {
		case <-req.Context().Done():
		case <-t.C:
		}
		pw.Close()
	}()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: pr, Request: req}, nil
}

func soakResponse(req *http.Request, code int, body []byte) *http.Response {
	return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req}
}

func soakStatus(req *http.Request, code int) *http.Response {
	b, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(http.StatusText(code))})
	return soakResponse(req, code, b)
}

// soakSteps is the number of distinct objects; each has ten changes.
func soakSteps() int {
	if n, err := strconv.Atoi(os.Getenv("LOOM_SOAK_OBJECTS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

func TestSoakStaysFlat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newSoakAPI()
		mgr, err := manager.New(manager.Options{Config: new(config.Config{Host: "https://soak.invalid"}),
			Transport: api, JSON: true, EventsController: "soak", Namespace: soakNamespace,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())

		cc := manager.CachedClient[corev1.ConfigMap](mgr)
		inf := cc.Informer()
		// A handler with a buffer of its own, to measure how far behind a
		// buffered handler gets.
		var handled atomic.Int64
		backlogReg, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
			Add:    func(*corev1.ConfigMap, bool) { handled.Add(1) },
			Update: func(_, _ *corev1.ConfigMap) { handled.Add(1) },
			Delete: func(*corev1.ConfigMap, bool) { handled.Add(1) },
		}, cache.HandlerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var touched, conflicts atomic.Int64
		reconcile := func(ctx context.Context, req *corev1.ConfigMap) (controller.Result, error) {
			obj, err := cc.Get(ctx, req.Namespace, req.Name)
			if apierrors.IsNotFound(err) || err == nil && obj.Annotations["soak"] != "" {
				return controller.Result{}, nil
			}
			if err != nil {
				return controller.Result{}, err
			}
			next := obj.DeepCopy()
			next.Annotations = map[string]string{"soak": "touched"}
			next.ResourceVersion = "" // unconditional: the driver's writes race with it
			if _, err := cc.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
				var se *rest.StatusError
				if errors.As(err, &se) && (se.Code == http.StatusConflict || se.Code == http.StatusNotFound) {
					conflicts.Add(1)
					return controller.Result{}, nil // a newer version, or gone: reconciled again, or not at all
				}
				return controller.Result{}, err
			}
			touched.Add(1)
			mgr.Recorder().Event(next, corev1.EventTypeNormal, "Touched", "the soak test touched it")
			return controller.Result{}, nil
		}
		// A CRD gate whose runnable fails at once, every time, as one whose
		// informers RBAC forbids would.
		var gateMu sync.Mutex
		var gateCtxs []context.Context
		gate := manager.WhenCRDEstablished(mgr, soakCRD, func(m controller.Manager) error {
			return m.Add(manager.RunnableFunc(func(ctx context.Context) error {
				gateMu.Lock()
				gateCtxs = append(gateCtxs, ctx)
				gateMu.Unlock()
				return errors.New("forbidden")
			}))
		})
		controller.New(mgr, reconcile, controller.Options{Name: "soak"})
		for _, r := range []manager.Runnable{gate} {
			if err := mgr.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()

		// Object i is created at step i, updated at steps i+100, i+200, …,
		// i+800 and deleted at step i+900: about 900 objects live at a
		// time, 10 changes each, 10⁵ distinct objects. Every 1,000 steps
		// the simulated clock moves on a minute.
		steps := soakSteps()
		const lifetime, batch = 900, 1000
		name := func(i int) string { return "o-" + strconv.Itoa(i) }
		var maxBacklog int
		type sample struct {
			step       int
			heap       uint64
			goroutines int
		}
		var samples []sample
		measure := func(step int) {
			synctest.Wait()
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			samples = append(samples, sample{step, ms.HeapAlloc, runtime.NumGoroutine()})
		}
		changes := 0
		for i := 0; i < steps+lifetime; i++ {
			if i < steps {
				if _, code := api.apply(watch.Added, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i)}, Data: map[string]string{"v": "0"}}); code != 0 {
					t.Fatalf("create %s: %d", name(i), code)
				}
				changes++
			}
			for k := 1; k <= 8; k++ {
				if j := i - 100*k; j >= 0 && j < steps {
					if _, code := api.apply(watch.Modified, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(j)}, Data: map[string]string{"v": strconv.Itoa(k)}}); code != 0 {
						t.Fatalf("update %s: %d", name(j), code)
					}
					changes++
				}
			}
			if j := i - lifetime; j >= 0 && j < steps {
				if _, code := api.apply(watch.Deleted, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(j)}}); code != 0 {
					t.Fatalf("delete %s: %d", name(j), code)
				}
				changes++
			}
			if i%100 == 0 {
				maxBacklog = max(maxBacklog, backlogReg.Pending())
			}
			if i%batch == batch-1 {
				synctest.Wait()
				time.Sleep(time.Minute)
				if n := i + 1; n%max(steps/10, 1) == 0 {
					measure(n)
				}
			}
		}
		synctest.Wait()
		time.Sleep(time.Hour) // past every window: events, spam filter, deletes remembered
		measure(steps + lifetime)

		// The failing gated runnable was retried with a growing pause, and
		// each run's context was released when it stopped (checked before
		// the manager's own end releases them all).
		gateMu.Lock()
		gateRuns := len(gateCtxs)
		for n, c := range gateCtxs {
			if c.Err() == nil && n < gateRuns-1 {
				t.Errorf("the context of gated run %d was never released", n)
			}
		}
		gateMu.Unlock()
		if gateRuns > 60 {
			t.Errorf("the failing gated runnable was started %d times in %s of simulated time; want a growing pause between starts", gateRuns, time.Duration(steps/batch+60)*time.Minute)
		}

		cancel()
		if err := <-done; err != nil {
			t.Fatalf("manager: %v", err)
		}
		for _, s := range samples {
			t.Logf("after %7d objects: heap %6.1f MB, %d goroutines", s.step, float64(s.heap)/1e6, s.goroutines)
		}
		t.Logf("%d changes to %d objects, %d handled by a buffered handler (largest backlog seen %d), %d touched (%d conflicts), %d events recorded (%d dropped), %d gated runs, %d requests to the API",
			changes, steps, handled.Load(), maxBacklog, touched.Load(), conflicts.Load(), touched.Load()-mgr.Recorder().Dropped(), mgr.Recorder().Dropped(), gateRuns, api.requests.Load())

		// Flat after warm-up: within 10 % (and 256 kB, for small runs) of
		// the heap at warm-up, and the same goroutines. Warm-up is an
		// hour of simulated time, or half the run if that is shorter: the
		// events spam filter keeps an object's bucket until it has
		// refilled, 5 minutes per event (about 45 minutes for the nine
		// events of an object here), so its map reaches its size only then.
		w := 0
		for w < len(samples)-2 && samples[w].step < min(60*batch, steps/2) {
			w++
		}
		// The last sample, taken once the run has drained, must be within
		// 10 %; samples in between within 25 %, since they also hold work
		// waiting on the fake clock (conflict retries, events being
		// aggregated), whose amount depends on scheduling. A leak grows
		// with every batch, so it still shows in the last sample.
		warm := samples[w]
		for i, s := range samples[w+1:] {
			pct := uint64(125)
			if w+1+i == len(samples)-1 {
				pct = 110
			}
			if limit := max(warm.heap*pct/100, warm.heap+256<<10); s.heap > limit {
				t.Errorf("heap grew from %.1f MB after %d objects to %.1f MB after %d (limit +%d %%)", float64(warm.heap)/1e6, warm.step, float64(s.heap)/1e6, s.step, pct-100)
			}
			if s.goroutines > warm.goroutines {
				t.Errorf("goroutines grew from %d after %d objects to %d after %d", warm.goroutines, warm.step, s.goroutines, s.step)
			}
		}
	})
}
