package fake_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/client/fake"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
)

func newServer(t *testing.T, opts fake.Options) *fake.Server {
	t.Helper()
	srv, err := fake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func configMaps(t *testing.T, srv *fake.Server, ct rest.ContentType) *client.Client[*corev1.ConfigMap] {
	t.Helper()
	rc, err := srv.REST(rest.Options{ContentType: ct})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Namespace("default")
}

// TestErrors checks that the fake's errors reach typed clients as
// apierrors knows them, in JSON and with protobuf bodies.
func TestErrors(t *testing.T) {
	for _, ct := range []rest.ContentType{rest.JSON, rest.Protobuf} {
		t.Run(ct.String(), func(t *testing.T) {
			cms := configMaps(t, newServer(t, fake.Options{}), ct)
			ctx := t.Context()
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cm.UID == "" || cm.ResourceVersion == "" || cm.CreationTimestamp.IsZero() || cm.Data["k"] != "v" {
				t.Fatalf("created %+v", cm)
			}
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
				t.Errorf("second create: %v, want AlreadyExists", err)
			}
			if _, err := cms.Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get: %v, want NotFound", err)
			}
			stale := cm.DeepCopy()
			cm.Data["k"] = "w"
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			stale.Data["k"] = "x"
			if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("stale update: %v, want Conflict", err)
			}
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Not_Valid"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
				t.Errorf("bad name: %v, want Invalid", err)
			}
		})
	}
}

// TestWatchInBubble watches inside a synctest bubble: events arrive as
// writes happen, and a watch from before a compaction gets 410.
func TestWatchInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t, fake.Options{})
		cms := configMaps(t, srv, rest.JSON)
		ctx := t.Context()
		first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		events := make(chan rest.Event[*corev1.ConfigMap])
		go func() {
			defer close(events)
			for {
				ev, err := w.Next()
				if err != nil {
					return
				}
				events <- ev
			}
		}()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ev := <-events; ev.Type != watch.Added || ev.Object.Name != "b" {
			t.Fatalf("event %s %v, want ADDED b", ev.Type, ev.Object)
		}
		srv.SendBookmarks() // this watch did not ask for them
		if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if ev := <-events; ev.Type != watch.Deleted || ev.Object.Name != "a" {
			t.Fatalf("event %s %v, want DELETED a", ev.Type, ev.Object)
		}
		w.Stop()
		for range events {
		}

		srv.Compact()
		w, err = cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != watch.Error || !apierrors.IsResourceExpired(ev.Err()) {
			t.Fatalf("watch after compaction: %s %v, want ERROR 410 Expired", ev.Type, ev.Err())
		}
		synctest.Wait()
	})
}

// TestSendBookmarks sends a bookmark to a watch that allows them.
func TestSendBookmarks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t, fake.Options{})
		cms := configMaps(t, srv, rest.JSON)
		w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: srv.ResourceVersion(), AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		synctest.Wait() // the watch is open
		srv.SendBookmarks()
		ev, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != watch.Bookmark || ev.Object.ResourceVersion != srv.ResourceVersion() {
			t.Fatalf("event %s %v, want BOOKMARK at %s", ev.Type, ev.Object, srv.ResourceVersion())
		}
	})
}

// TestCRDInstall installs a CRD as a client would (crd.Install applies it
// and waits until it is established and discoverable); discovery then
// maps its kind, and its objects are served.
func TestCRDInstall(t *testing.T) {
	srv := newServer(t, fake.Options{})
	rc, err := srv.REST(rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	objs, err := crd.ReadFiles("testdata/crds/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := crd.Install(ctx, rc, objs, crd.Options{}); err != nil {
		t.Fatal(err)
	}
	mapper := discovery.NewMapper(discovery.New(rc, discovery.Options{}), discovery.MapperOptions{})
	m, err := mapper.RESTMapping(ctx, schema.GroupKind{Group: "corpus.loom.dev", Kind: "Widget"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Resource.Resource != "widgets" || !m.Namespaced {
		t.Fatalf("mapping %+v", m)
	}
	if _, err := mapper.RESTMapping(ctx, schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
		t.Fatal(err)
	}
	widgets, err := client.For[unstructured.Unstructured](rc, client.Options{Mapper: mapper, Resource: client.Resource{Resource: m.Resource, Kind: m.Kind, Namespaced: true}})
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "corpus.loom.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"}, "spec": map[string]any{"size": "s", "nope": 1}}}
	got, err := widgets.Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Object["spec"].(map[string]any)["nope"]; ok || got.GetGeneration() != 1 {
		t.Fatalf("created %v: want the unknown field pruned, generation 1", got.Object)
	}
	if err := crd.Uninstall(ctx, rc, objs, crd.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := widgets.Namespace("default").Get(ctx, "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after the CRD is gone: %v, want NotFound", err)
	}
}

// TestHandler serves the fake over a real socket.
func TestHandler(t *testing.T) {
	ts := httptest.NewServer(newServer(t, fake.Options{}))
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/api/v1/namespaces/default")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"default"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// TestOptions checks the clock and the seed.
func TestOptions(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var uids []string
	for range 2 {
		srv := newServer(t, fake.Options{Now: func() time.Time { return at }, Seed: 7})
		cm, err := configMaps(t, srv, rest.JSON).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !cm.CreationTimestamp.Time.Equal(at) {
			t.Errorf("creationTimestamp %v, want %v", cm.CreationTimestamp, at)
		}
		uids = append(uids, string(cm.UID)+" "+cm.Name)
	}
	if uids[0] != uids[1] {
		t.Errorf("the same seed gave %q and %q", uids[0], uids[1])
	}
}

// TestGarbageCollection checks Options.GarbageCollection: owned objects
// go with their owner; Orphan keeps them, without the owner reference;
// Foreground deletes them before the owner. Without it, they stay.
func TestGarbageCollection(t *testing.T) {
	ctx := t.Context()
	setup := func(t *testing.T, gc bool) (*client.Client[*corev1.ConfigMap], *corev1.ConfigMap) {
		t.Helper()
		cms := configMaps(t, newServer(t, fake.Options{GarbageCollection: gc}), rest.JSON)
		owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return cms, owner
	}
	gone := func(cms *client.Client[*corev1.ConfigMap], name string) bool {
		_, err := cms.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	for _, tt := range []struct {
		name       string
		gc         bool
		policy     metav1.DeletionPropagation
		ownerGone  bool
		depGone    bool
		depHasRefs bool
	}{
		{"off", false, metav1.DeletePropagationBackground, true, false, true},
		{"off foreground", false, metav1.DeletePropagationForeground, false, false, true},
		{"background", true, metav1.DeletePropagationBackground, true, true, false},
		{"orphan", true, metav1.DeletePropagationOrphan, true, false, false},
		{"foreground", true, metav1.DeletePropagationForeground, true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cms, _ := setup(t, tt.gc)
			if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: &tt.policy}); err != nil {
				t.Fatal(err)
			}
			if got := gone(cms, "owner"); got != tt.ownerGone {
				t.Errorf("owner gone: %v, want %v", got, tt.ownerGone)
			}
			if got := gone(cms, "dep"); got != tt.depGone {
				t.Errorf("dependent gone: %v, want %v", got, tt.depGone)
			}
			if !tt.depGone {
				dep, err := cms.Get(ctx, "dep", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := len(dep.OwnerReferences) > 0; got != tt.depHasRefs {
					t.Errorf("dependent has owner references: %v, want %v", got, tt.depHasRefs)
				}
			}
		})
	}
}

// TestMetadataOnly reads and watches objects as PartialObjectMetadata.
func TestMetadataOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t, fake.Options{})
		cms := configMaps(t, srv, rest.Protobuf)
		ctx := t.Context()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"x": "1"}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rc, err := srv.REST(rest.Options{ContentType: rest.Protobuf})
		if err != nil {
			t.Fatal(err)
		}
		metas, err := client.For[metav1.PartialObjectMetadata](rc, client.Options{Resource: client.Resource{
			Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Kind:     schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespaced: true}})
		if err != nil {
			t.Fatal(err)
		}
		list, err := metas.Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "a" || list.Items[0].Labels["x"] != "1" {
			t.Fatalf("list %+v", list.Items)
		}
		w, err := metas.Namespace("default").Watch(ctx, metav1.ListOptions{SendInitialEvents: new(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for _, want := range []watch.EventType{watch.Added, watch.Bookmark} {
			ev, err := w.Next()
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != want {
				t.Fatalf("event %s, want %s", ev.Type, want)
			}
			if want == watch.Bookmark && ev.Object.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Fatalf("bookmark %v without the initial-events-end annotation", ev.Object)
			}
		}
	})
}
