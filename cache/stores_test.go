package cache_test

import (
	"errors"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/cache"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		ns, name, key string
		err           error
	}{
		{"default", "web", "default/web", nil},
		{"", "node-1", "node-1", nil},
		{"default", "", "", cache.ErrEmptyKey},
	}
	for _, tt := range tests {
		key, err := cache.MetaNamespaceKey(&obj{Namespace: tt.ns, Name: tt.name})
		if key != tt.key || !errors.Is(err, tt.err) {
			t.Errorf("MetaNamespaceKey(%q, %q) = %q, %v; want %q, %v", tt.ns, tt.name, key, err, tt.key, tt.err)
		}
		if tt.err != nil {
			continue
		}
		ns, name, err := cache.SplitKey(key)
		if ns != tt.ns || name != tt.name || err != nil {
			t.Errorf("SplitKey(%q) = %q, %q, %v", key, ns, name, err)
		}
	}
	for _, bad := range []string{"", "/", "a/", "/b", "a/b/c"} {
		if _, _, err := cache.SplitKey(bad); !errors.Is(err, cache.ErrMalformedKey) {
			t.Errorf("SplitKey(%q) = %v, want ErrMalformedKey", bad, err)
		}
	}
}

func TestStoreIndexErrors(t *testing.T) {
	boom := errors.New("boom")
	failOn := func(name string) cache.IndexFunc[*obj] {
		return func(o *obj) ([]string, error) {
			if o.Name == name {
				return nil, boom
			}
			return []string{o.Name}, nil
		}
	}
	s := cache.NewStore(cache.StoreOptions[*obj]{Indexers: cache.Indexers[*obj]{"by-name": failOn("bad")}})
	_ = s.Add(&obj{Namespace: "a", Name: "x", Version: 1})

	var ie *cache.IndexError
	if err := s.Add(&obj{Namespace: "a", Name: "bad"}); !errors.As(err, &ie) || ie.Index != "by-name" || ie.Key != "a/bad" || !errors.Is(err, boom) {
		t.Errorf("Add with a failing index = %v, want an IndexError", err)
	}
	if err := s.Replace([]*obj{{Namespace: "a", Name: "bad"}}); !errors.As(err, &ie) {
		t.Errorf("Replace with a failing index = %v, want an IndexError", err)
	}
	if keys := s.ListKeys(); !slices.Equal(keys, []string{"a/x"}) {
		t.Errorf("after failed writes, keys = %q, want [a/x]", keys)
	}

	if err := s.AddIndexers(cache.Indexers[*obj]{"by-name": failOn("")}); !errors.Is(err, cache.ErrIndexExists) {
		t.Errorf("AddIndexers of a taken name = %v, want ErrIndexExists", err)
	}
	if err := s.AddIndexers(cache.Indexers[*obj]{"other": failOn("x")}); !errors.As(err, &ie) {
		t.Errorf("AddIndexers whose function fails = %v, want an IndexError", err)
	}
	if _, err := s.ByIndex("other", "x"); !errors.Is(err, cache.ErrNoSuchIndex) {
		t.Errorf("a failed AddIndexers added its index: %v", err)
	}
	// Index of a probe the function rejects.
	if _, err := s.Index("by-name", &obj{Name: "bad"}); !errors.As(err, &ie) {
		t.Errorf("Index with a failing probe = %v, want an IndexError", err)
	}
}

// TestStoreNamespaceIndexOverride: a custom index named NamespaceIndex
// answers index queries, while Select keeps the key-derived namespaces.
func TestStoreNamespaceIndexOverride(t *testing.T) {
	s := cache.NewStore(cache.StoreOptions[*obj]{Indexers: cache.Indexers[*obj]{
		cache.NamespaceIndex: func(o *obj) ([]string, error) { return []string{"all"}, nil },
	}})
	_ = s.Add(&obj{Namespace: "a", Name: "x"})
	_ = s.Add(&obj{Namespace: "b", Name: "y"})
	if got, _ := s.IndexKeys(cache.NamespaceIndex, "all"); len(got) != 2 {
		t.Errorf("IndexKeys(namespace, all) = %q, want both keys", got)
	}
	if got, _ := s.Select("a", nil); len(got) != 1 || got[0].Name != "x" {
		t.Errorf("Select(a) = %v, want a/x", got)
	}
}

type plain struct{ ID, Val string }

func TestStoreWithoutLabels(t *testing.T) {
	s := cache.NewStore(cache.StoreOptions[plain]{KeyFunc: func(p plain) (string, error) { return p.ID, nil }})
	_ = s.Add(plain{"ns/a", "1"})
	if got, err := s.Select("", labels.Everything()); err != nil || len(got) != 1 {
		t.Errorf("Select(everything) = %v, %v; want the one object", got, err)
	}
	if got, err := s.Select("ns", nil); err != nil || len(got) != 1 {
		t.Errorf("Select(ns, nil) = %v, %v; want the one object", got, err)
	}
	if _, err := s.Select("", labels.SelectorFromSet(labels.Set{"a": "b"})); !errors.Is(err, cache.ErrNoLabels) {
		t.Errorf("Select(a=b) without labels = %v, want ErrNoLabels", err)
	}
	if err := cache.NewStore(cache.StoreOptions[plain]{}).Add(plain{}); !errors.Is(err, cache.ErrNoKeyFunc) {
		t.Errorf("Add without a key function = %v, want ErrNoKeyFunc", err)
	}
	// A Labels option gives any type a label index.
	l := cache.NewStore(cache.StoreOptions[plain]{
		KeyFunc: func(p plain) (string, error) { return p.ID, nil },
		Labels:  func(p plain) map[string]string { return map[string]string{"val": p.Val} },
	})
	_ = l.Add(plain{"a", "1"})
	_ = l.Add(plain{"b", "2"})
	if got, err := l.Select("", labels.SelectorFromSet(labels.Set{"val": "2"})); err != nil || len(got) != 1 || got[0].ID != "b" {
		t.Errorf("Select(val=2) = %v, %v; want b", got, err)
	}
}
