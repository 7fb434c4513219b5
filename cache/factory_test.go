package cache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
)

// offline is a REST client for a server that is never contacted:
// InformerFor makes no request for built-in types.
func offline(t *testing.T) *rest.Client {
	t.Helper()
	rc, err := rest.New(config.Config{Host: "https://127.0.0.1:1"}, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestFactorySharesInformers(t *testing.T) {
	f := cache.NewFactory(offline(t), cache.FactoryOptions{Namespace: "team"})
	defer f.Shutdown()
	cms := func(o cache.InformerForOptions) *cache.Informer[*corev1.ConfigMap] {
		t.Helper()
		inf, err := cache.InformerFor[corev1.ConfigMap](f, o)
		if err != nil {
			t.Fatal(err)
		}
		return inf
	}
	base := cms(cache.InformerForOptions{})
	tests := []struct {
		name     string
		opts     cache.InformerForOptions
		same     bool
		wantName string
	}{
		{"the same options", cache.InformerForOptions{}, true, `configmaps.v1 namespace="team"`},
		{"the factory's namespace, spelt out", cache.InformerForOptions{Namespace: "team"}, true, `configmaps.v1 namespace="team"`},
		{"another namespace", cache.InformerForOptions{Namespace: "other"}, false, `configmaps.v1 namespace="other"`},
		{"a label selector", cache.InformerForOptions{LabelSelector: "app=web"}, false, `configmaps.v1 namespace="team" labels="app=web"`},
		{"a field selector", cache.InformerForOptions{FieldSelector: "metadata.name=x"}, false, `configmaps.v1 namespace="team" fields="metadata.name=x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inf := cms(tt.opts)
			if (inf == base) != tt.same {
				t.Errorf("shared with the base informer: %v, want %v", inf == base, tt.same)
			}
			if inf.Name() != tt.wantName {
				t.Errorf("name %q, want %q", inf.Name(), tt.wantName)
			}
			if again := cms(tt.opts); again != inf {
				t.Error("the same options twice gave two informers")
			}
		})
	}

	t.Run("other types and resources", func(t *testing.T) {
		nodes, err := cache.InformerFor[corev1.Node](f, cache.InformerForOptions{Namespace: "ignored"})
		if err != nil || nodes.Name() != "nodes.v1" {
			t.Errorf("cluster-scoped informer %q (%v), want nodes.v1 with no namespace", nodes.Name(), err)
		}
		deps, err := cache.InformerFor[appsv1.Deployment](f, cache.InformerForOptions{})
		if err != nil || deps.Name() != `deployments.v1.apps namespace="team"` {
			t.Errorf("deployments informer %q (%v)", deps.Name(), err)
		}
		res := client.Resource{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespaced: true}
		metas, err := cache.InformerFor[metav1.PartialObjectMetadata](f, cache.InformerForOptions{Resource: res})
		if err != nil || metas.Name() != `configmaps.v1 (metadata) namespace="team"` {
			t.Errorf("metadata informer %q (%v)", metas.Name(), err)
		}
	})

	t.Run("indexers are added to a shared informer", func(t *testing.T) {
		byData := func(cm *corev1.ConfigMap) ([]string, error) { return []string{cm.Data["v"]}, nil }
		inf := cms(cache.InformerForOptions{})
		if err := inf.AddIndexer("data-v", byData); err != nil {
			t.Fatal(err)
		}
		if _, err := base.Indexer().ByIndex("data-v", "1"); err != nil {
			t.Fatalf("index not added to the shared informer: %v", err)
		}
		if err := inf.AddIndexer("data-v", byData); !errors.Is(err, cache.ErrIndexExists) {
			t.Fatalf("an index added twice: %v, want ErrIndexExists", err)
		}
	})
}

func TestFactoryTweakListOptions(t *testing.T) {
	f := cache.NewFactory(offline(t), cache.FactoryOptions{
		TweakListOptions: func(o *cache.ListWatchOptions) {
			o.LabelSelector = strings.TrimPrefix(o.LabelSelector+",owner=me", ",")
		},
	})
	defer f.Shutdown()
	inf, err := cache.InformerFor[corev1.Secret](f, cache.InformerForOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `secrets.v1 labels="app=web,owner=me"`; inf.Name() != want {
		t.Fatalf("name %q, want %q", inf.Name(), want)
	}
}

func TestFactoryErrors(t *testing.T) {
	f := cache.NewFactory(offline(t), cache.FactoryOptions{})
	var ute *client.UnknownTypeError
	if _, err := cache.InformerFor[unstructured.Unstructured](f, cache.InformerForOptions{}); !errors.As(err, &ute) {
		t.Errorf("an unstructured informer without a Resource: %v, want an UnknownTypeError", err)
	}
	f.Shutdown()
	if _, err := cache.InformerFor[corev1.Pod](f, cache.InformerForOptions{}); !errors.Is(err, cache.ErrFactoryShutdown) {
		t.Errorf("InformerFor after Shutdown = %v, want ErrFactoryShutdown", err)
	}
	if err := f.Start(t.Context()); !errors.Is(err, cache.ErrFactoryShutdown) {
		t.Errorf("Start after Shutdown = %v, want ErrFactoryShutdown", err)
	}
}

// fakeRunner is a Runner whose state a test sets.
type fakeRunner struct {
	name   string
	synced atomic.Bool
	err    atomic.Value // error
	polls  atomic.Int32
	syncAt int32 // HasSynced turns true on this poll (0: never by itself)
}

func (r *fakeRunner) Name() string                    { return r.name }
func (r *fakeRunner) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (r *fakeRunner) HasSynced() bool {
	if n := r.polls.Add(1); r.syncAt > 0 && n >= r.syncAt {
		r.synced.Store(true)
	}
	return r.synced.Load()
}
func (r *fakeRunner) LastError() error {
	err, _ := r.err.Load().(error)
	return err
}

func runner(name string, synced bool, err error) *fakeRunner {
	r := &fakeRunner{name: name}
	r.synced.Store(synced)
	if err != nil {
		r.err.Store(err)
	}
	return r
}

func TestWaitForCacheSync(t *testing.T) {
	forbidden := &cache.ReflectorError{Name: "pods", Phase: "list", Err: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no RBAC"))}
	notFound := &cache.ReflectorError{Name: "widgets", Phase: "list", Err: apierrors.NewNotFound(schema.GroupResource{Resource: "widgets"}, "")}
	transient := &cache.ReflectorError{Name: "flaky", Phase: "watch", Err: errors.New("connection reset")}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		runners []cache.Syncer
		want    string // the error, "" for nil
		is      []error
	}{{
		name:    "all synced",
		ctx:     t.Context(),
		runners: []cache.Syncer{runner("a", true, nil), runner("b", true, nil)},
	}, {
		name:    "one syncs after a few polls",
		ctx:     t.Context(),
		runners: []cache.Syncer{runner("a", true, nil), &fakeRunner{name: "slow", syncAt: 3}},
	}, {
		name:    "RBAC denial: at once, naming every informer not synced, in order",
		ctx:     t.Context(),
		runners: []cache.Syncer{runner("z-pods", false, forbidden), runner("ok", true, nil), runner("a-pending", false, nil)},
		want: "cache: informer a-pending has not synced: not synced yet\n" +
			"cache: informer z-pods has not synced: cache: reflector pods: list: pods is forbidden: no RBAC",
		is: []error{cache.ErrNotSynced},
	}, {
		name:    "a missing resource: at once",
		ctx:     t.Context(),
		runners: []cache.Syncer{runner("widgets", false, notFound)},
		want:    `cache: informer widgets has not synced: cache: reflector widgets: list: widgets "" not found`,
	}, {
		name:    "a stopped informer: at once",
		ctx:     t.Context(),
		runners: []cache.Syncer{runner("gone", false, fmt.Errorf("x: %w", cache.ErrStopped))},
		want:    "cache: informer gone has not synced: x: informer stopped",
		is:      []error{cache.ErrStopped},
	}, {
		name:    "a transient error is waited for until ctx ends, and reported",
		ctx:     cancelled,
		runners: []cache.Syncer{runner("flaky", false, transient), runner("quiet", false, nil)},
		want: "cache: informer flaky has not synced: cache: reflector flaky: watch: connection reset\n" +
			"cache: informer quiet has not synced: context canceled",
		is: []error{context.Canceled},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cache.WaitForCacheSync(tt.ctx, tt.runners...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err =\n%v\nwant\n%s", err, tt.want)
			}
			var se *cache.SyncError
			if !errors.As(err, &se) {
				t.Error("not a SyncError")
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(err, %v) = false", target)
				}
			}
		})
	}
	// Typed checks through the joined errors.
	err := cache.WaitForCacheSync(t.Context(), runner("pods", false, forbidden))
	var re *cache.ReflectorError
	if !apierrors.IsForbidden(err) || !errors.As(err, &re) || re.Phase != "list" {
		t.Fatalf("%v: want Forbidden, with its ReflectorError", err)
	}
}
