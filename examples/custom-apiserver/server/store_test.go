package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1beta1"
)

func newBackend(t *testing.T, path string) (*Backend, *Store, *Store) {
	t.Helper()
	b, err := NewBackend(path, Codecs.LegacyCodec(v1beta1.SchemeGroupVersion), Codecs.UniversalDecoder(restaurant.SchemeGroupVersion))
	if err != nil {
		t.Fatal(err)
	}
	pizzas, err := NewStore(b, Pizzas())
	if err != nil {
		t.Fatal(err)
	}
	toppings, err := NewStore(b, Toppings())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pizzas.Destroy(); toppings.Destroy() })
	return b, pizzas, toppings
}

func inNS(ns string) context.Context {
	return genericapirequest.WithNamespace(context.Background(), ns)
}

func newPizza(name string, lbls map[string]string, toppings ...string) *restaurant.Pizza {
	p := &restaurant.Pizza{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	for _, t := range toppings {
		p.Spec.Toppings = append(p.Spec.Toppings, restaurant.PizzaTopping{Name: t, Quantity: 1})
	}
	return p
}

func create(t *testing.T, s *Store, ctx context.Context, obj runtime.Object) runtime.Object {
	t.Helper()
	out, err := s.Create(ctx, obj, nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// next reads one event, failing after a deadline.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10 s")
	}
	return watch.Event{}
}

func describe(ev watch.Event) string {
	if p, ok := ev.Object.(*restaurant.Pizza); ok {
		return string(ev.Type) + " " + p.Name + "@" + p.ResourceVersion
	}
	return string(ev.Type)
}

func TestStoreCRUDAndResourceVersions(t *testing.T) {
	_, pizzas, _ := newBackend(t, "")
	ctx := inNS("default")
	a := create(t, pizzas, ctx, newPizza("a", nil, "tomato")).(*restaurant.Pizza)
	if a.ResourceVersion != "1" || a.UID == "" || a.Generation != 1 || a.Namespace != "default" || a.CreationTimestamp.IsZero() {
		t.Fatalf("created: %+v", a.ObjectMeta)
	}
	if _, err := pizzas.Create(ctx, newPizza("a", nil), nil, &metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}
	gen := create(t, pizzas, ctx, &restaurant.Pizza{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}).(*restaurant.Pizza)
	if !strings.HasPrefix(gen.Name, "gen-") || len(gen.Name) == len("gen-") {
		t.Fatalf("generateName: %q", gen.Name)
	}

	// A label change keeps the generation; a spec change bumps it; a
	// write that changes nothing keeps the resourceVersion.
	up := a.DeepCopy()
	up.Labels = map[string]string{"x": "1"}
	out, _, err := pizzas.Update(ctx, "a", rest.DefaultUpdatedObjectInfo(up), nil, nil, false, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labelled := out.(*restaurant.Pizza)
	if labelled.Generation != 1 || labelled.ResourceVersion == a.ResourceVersion {
		t.Fatalf("after a label change: gen %d rv %s", labelled.Generation, labelled.ResourceVersion)
	}
	if _, _, err := pizzas.Update(ctx, "a", rest.DefaultUpdatedObjectInfo(up), nil, nil, false, &metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
	same, _, err := pizzas.Update(ctx, "a", rest.DefaultUpdatedObjectInfo(labelled.DeepCopy()), nil, nil, false, &metav1.UpdateOptions{})
	if err != nil || same.(*restaurant.Pizza).ResourceVersion != labelled.ResourceVersion {
		t.Fatalf("no-op update: %v, %v", same, err)
	}
	spec := labelled.DeepCopy()
	spec.Spec.Toppings[0].Quantity = 2
	out, _, err = pizzas.Update(ctx, "a", rest.DefaultUpdatedObjectInfo(spec), nil, nil, false, &metav1.UpdateOptions{})
	if err != nil || out.(*restaurant.Pizza).Generation != 2 {
		t.Fatalf("spec update: %v, %v", out, err)
	}

	// Validation, with field paths.
	bad := newPizza("bad", nil, "tomato", "tomato")
	bad.Spec.Toppings[1].Quantity = 0
	_, err = pizzas.Create(ctx, bad, nil, &metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.toppings[1].name: Duplicate value") || !strings.Contains(err.Error(), "spec.toppings[1].quantity") {
		t.Fatalf("invalid pizza: %v", err)
	}
	if _, err := pizzas.Create(context.Background(), newPizza("nons", nil), nil, &metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Fatalf("pizza without a namespace: %v", err)
	}

	// Dry run stores nothing.
	if _, err := pizzas.Create(ctx, newPizza("dry", nil), nil, &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pizzas.Get(ctx, "dry", nil); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run object stored: %v", err)
	}

	// Namespaces and label selectors.
	create(t, pizzas, inNS("other"), newPizza("a", map[string]string{"x": "1"}))
	list, err := pizzas.List(ctx, &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"x": "1"})})
	if err != nil {
		t.Fatal(err)
	}
	if items := list.(*restaurant.PizzaList).Items; len(items) != 1 || items[0].Namespace != "default" {
		t.Fatalf("selector list in default: %+v", items)
	}
	all, _ := pizzas.List(inNS(""), nil)
	if n := len(all.(*restaurant.PizzaList).Items); n != 3 {
		t.Fatalf("all namespaces: %d pizzas, want 3", n)
	}

	// Delete with a stale precondition, then for real.
	stale := "1"
	if _, _, err := pizzas.Delete(ctx, "a", nil, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &stale}}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a stale precondition: %v", err)
	}
	if _, deleted, err := pizzas.Delete(ctx, "a", nil, nil); err != nil || !deleted {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if _, _, err := pizzas.Delete(ctx, "a", nil, nil); !apierrors.IsNotFound(err) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestFinalizersDelayDeletion(t *testing.T) {
	_, pizzas, _ := newBackend(t, "")
	ctx := inNS("default")
	p := newPizza("f", nil)
	p.Finalizers = []string{"example.com/oven"}
	create(t, pizzas, ctx, p)
	out, deleted, err := pizzas.Delete(ctx, "f", nil, nil)
	if err != nil || deleted || out.(*restaurant.Pizza).DeletionTimestamp == nil {
		t.Fatalf("delete with a finalizer: %v %v %v", out, deleted, err)
	}
	cur := out.(*restaurant.Pizza).DeepCopy()
	cur.Finalizers = nil
	if _, _, err := pizzas.Update(ctx, "f", rest.DefaultUpdatedObjectInfo(cur), nil, nil, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pizzas.Get(ctx, "f", nil); !apierrors.IsNotFound(err) {
		t.Fatalf("still there after its last finalizer went: %v", err)
	}
}

func TestWatch(t *testing.T) {
	_, pizzas, _ := newBackend(t, "")
	ctx := inNS("default")
	create(t, pizzas, ctx, newPizza("a", map[string]string{"tier": "gold"}))

	// From "0": the current state first.
	w, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := describe(next(t, w)); got != "ADDED a@1" {
		t.Fatalf("initial event %s", got)
	}

	// A selector watch sees an object leave and enter its selection as
	// DELETED and ADDED.
	gold, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "1", LabelSelector: labels.SelectorFromSet(labels.Set{"tier": "gold"})})
	if err != nil {
		t.Fatal(err)
	}
	defer gold.Stop()
	a, _ := pizzas.Get(ctx, "a", nil)
	plain := a.(*restaurant.Pizza).DeepCopy()
	plain.Labels = nil
	if _, _, err := pizzas.Update(ctx, "a", rest.DefaultUpdatedObjectInfo(plain), nil, nil, false, nil); err != nil {
		t.Fatal(err)
	}
	create(t, pizzas, ctx, newPizza("b", nil))
	if got := describe(next(t, gold)); got != "DELETED a@2" {
		t.Fatalf("gold watch: %s", got)
	}
	if got := describe(next(t, w)); got != "MODIFIED a@2" {
		t.Fatalf("watch: %s", got)
	}
	if got := describe(next(t, w)); got != "ADDED b@3" {
		t.Fatalf("watch: %s", got)
	}

	// From a resourceVersion: the history after it, selectors applied.
	replay, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Stop()
	if got := describe(next(t, replay)) + ", " + describe(next(t, replay)); got != "MODIFIED a@2, ADDED b@3" {
		t.Fatalf("replay: %s", got)
	}

	// A streaming list: the state, then the bookmark that ends it.
	yes := true
	stream, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Stop()
	got := describe(next(t, stream)) + ", " + describe(next(t, stream))
	mark := next(t, stream)
	m := mark.Object.(*restaurant.Pizza)
	if got != "ADDED a@2, ADDED b@3" || mark.Type != watch.Bookmark || m.ResourceVersion != "3" || m.Annotations["k8s.io/initial-events-end"] != "true" {
		t.Fatalf("streaming list: %s, then %s %+v", got, mark.Type, m.ObjectMeta)
	}

	if _, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "x"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("bad resourceVersion: %v", err)
	}
}

func TestWatchTooOldIsGone(t *testing.T) {
	_, pizzas, _ := newBackend(t, "")
	ctx := inNS("default")
	for range historySize + 5 {
		create(t, pizzas, ctx, &restaurant.Pizza{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"}})
	}
	if _, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "2"}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("watch from a dropped resourceVersion: %v, want 410", err)
	}
	w, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatalf("watch from a kept resourceVersion: %v", err)
	}
	w.Stop()
	// From the future (a storage file replaced by an older copy): 410 too,
	// so that clients relist instead of missing what came in between.
	if _, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "999999"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from a resourceVersion newer than the store's: %v, want 410", err)
	}
}

func TestSlowWatcherIsClosed(t *testing.T) {
	_, pizzas, _ := newBackend(t, "")
	ctx := inNS("default")
	w, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	for range watchBuffer + 1 {
		create(t, pizzas, ctx, &restaurant.Pizza{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"}})
	}
	n := 0
	for range w.ResultChan() {
		n++
	}
	if n != watchBuffer {
		t.Fatalf("a watcher that never read got %d events before it was closed, want %d", n, watchBuffer)
	}
	w.Stop() // after the store closed it: no panic
}

func TestFileStorageSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	b, pizzas, toppings := newBackend(t, path)
	create(t, toppings, context.Background(), &restaurant.Topping{ObjectMeta: metav1.ObjectMeta{Name: "tomato"}, Spec: restaurant.ToppingSpec{Cost: 0.5}})
	create(t, pizzas, inNS("default"), newPizza("a", map[string]string{"x": "1"}, "tomato"))
	if _, _, err := pizzas.Delete(inNS("default"), "a", nil, nil); err != nil {
		t.Fatal(err)
	}
	create(t, pizzas, inNS("default"), newPizza("b", nil, "tomato"))
	rv := b.ResourceVersion()

	b2, pizzas2, toppings2 := newBackend(t, path)
	if b2.ResourceVersion() != rv {
		t.Fatalf("resourceVersion %d after reload, want %d", b2.ResourceVersion(), rv)
	}
	if _, err := pizzas2.Get(inNS("default"), "a", nil); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted pizza back after reload: %v", err)
	}
	got, err := pizzas2.Get(inNS("default"), "b", nil)
	if err != nil || got.(*restaurant.Pizza).Spec.Toppings[0].Name != "tomato" {
		t.Fatalf("pizza b after reload: %v, %v", got, err)
	}
	if tp, err := toppings2.Get(context.Background(), "tomato", nil); err != nil || tp.(*restaurant.Topping).Spec.Cost != 0.5 {
		t.Fatalf("topping after reload: %v, %v", tp, err)
	}
	// The history does not survive: a watch from before the restart is
	// told to relist; one from the restart's resourceVersion is not.
	if _, err := pizzas2.Watch(inNS("default"), &metainternalversion.ListOptions{ResourceVersion: "1"}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("watch from before the restart: %v", err)
	}
	w, err := pizzas2.Watch(inNS("default"), &metainternalversion.ListOptions{ResourceVersion: got.(*restaurant.Pizza).ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
}

func TestFileStorageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewBackend(bad, Codecs.LegacyCodec(v1beta1.SchemeGroupVersion), Codecs.UniversalDecoder(restaurant.SchemeGroupVersion))
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("corrupt file: %v", err)
	}

	// A write that cannot reach the file fails and changes nothing.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	b, pizzas, _ := newBackend(t, filepath.Join(sub, "state.json"))
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	_, err = pizzas.Create(inNS("default"), newPizza("lost", nil), nil, &metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "write storage file") {
		t.Fatalf("create without a folder: %v", err)
	}
	if _, err := pizzas.Get(inNS("default"), "lost", nil); !apierrors.IsNotFound(err) || b.ResourceVersion() != 0 {
		t.Fatalf("failed write left the pizza (%v) or moved the resourceVersion (%d)", err, b.ResourceVersion())
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{Storage: "memory", SecurePort: 8443, CertDir: "certs"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		change func(*Options)
		want   error
	}{
		{func(o *Options) { o.Storage = "etcd" }, ErrBadStorage},
		{func(o *Options) { o.Storage = "file:" }, ErrBadStorage},
		{func(o *Options) { o.SecurePort = 0 }, ErrNoPort},
		{func(o *Options) { o.SecurePort = 70000 }, ErrNoPort},
		{func(o *Options) { o.CertDir = "" }, ErrNoCertDir},
		{func(o *Options) { o.BindAddress = "localhost" }, ErrBadBindAddress},
	} {
		o := ok
		tt.change(&o)
		if err := o.Validate(); !errors.Is(err, tt.want) {
			t.Errorf("%+v: %v, want %v", o, err, tt.want)
		}
		if _, err := New(o); !errors.Is(err, tt.want) {
			t.Errorf("New(%+v): %v, want %v", o, err, tt.want)
		}
	}
}

func TestDestroyEndsAndRefusesWatches(t *testing.T) {
	_, pizzas, _ := newBackend(t, "")
	ctx := inNS("default")
	w, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pizzas.Destroy()
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("watch still open after Destroy")
	}
	if _, err := pizzas.Watch(ctx, &metainternalversion.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("watch after Destroy: %v, want 503", err)
	}
}

// fixedNames hands out the names it holds, in order, ignoring the prefix.
type fixedNames struct{ names []string }

func (f *fixedNames) GenerateName(string) string {
	n := f.names[0]
	f.names = f.names[1:]
	return n
}

// A generated name that collides is generated again, as kube-apiserver
// does, up to generateNameAttempts times; then the create fails with
// AlreadyExists.
func TestGenerateNameRetriesCollisions(t *testing.T) {
	_, pizzas, _ := newBackend(t, "")
	ctx := inNS("default")
	create(t, pizzas, ctx, newPizza("p-aaaaa", nil))
	gen := &fixedNames{names: []string{"p-aaaaa", "p-aaaaa", "p-bbbbb"}}
	pizzas.names = gen
	got := create(t, pizzas, ctx, &restaurant.Pizza{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"}}).(*restaurant.Pizza)
	if got.Name != "p-bbbbb" || len(gen.names) != 0 {
		t.Fatalf("created %q with %d names left, want p-bbbbb after two collisions", got.Name, len(gen.names))
	}
	gen.names = slices.Repeat([]string{"p-aaaaa"}, generateNameAttempts)
	_, err := pizzas.Create(ctx, &restaurant.Pizza{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"}}, nil, &metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) || len(gen.names) != 0 {
		t.Fatalf("after %d collisions: %v (%d names left), want AlreadyExists", generateNameAttempts, err, len(gen.names))
	}
}
