package cache

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func streamCM(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// fifoSystem is a DeltaFIFO and the store its consumer keeps.
type fifoSystem struct {
	store *Store[*corev1.ConfigMap]
	fifo  *DeltaFIFO[*corev1.ConfigMap]
	tombs map[string]bool // keys popped with a tombstone
}

func newFIFOSystem(t *testing.T, cached []string, queued map[string]DeltaType) *fifoSystem {
	s := &fifoSystem{store: NewStore(StoreOptions[*corev1.ConfigMap]{}), tombs: map[string]bool{}}
	s.fifo = NewDeltaFIFO(DeltaFIFOOptions[*corev1.ConfigMap]{KnownObjects: s.store})
	for _, name := range cached {
		if err := s.store.Add(streamCM(name, "1")); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(queued)) {
		var err error
		switch queued[name] {
		case Added:
			err = s.fifo.Add(streamCM(name, "q"))
		case Updated:
			err = s.fifo.Update(streamCM(name, "q"))
		case Deleted:
			err = s.fifo.Delete(streamCM(name, "q"))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// pop pops one key and applies its deltas to the store.
func (s *fifoSystem) pop(t *testing.T) {
	err := s.fifo.Pop(context.Background(), func(key string, deltas []Delta[*corev1.ConfigMap]) error {
		for _, d := range deltas {
			if d.Type == Deleted {
				if d.FinalStateUnknown {
					s.tombs[key] = true
				}
				if err := s.store.Delete(d.Object); err != nil {
					return err
				}
				continue
			}
			if err := s.store.Update(d.Object); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (s *fifoSystem) drain(t *testing.T) {
	for s.fifo.Len() > 0 {
		s.pop(t)
	}
}

func (s *fifoSystem) state() map[string]string {
	m := map[string]string{}
	for _, o := range s.store.List() {
		m[o.Name] = o.ResourceVersion
	}
	return m
}

// TestStreamedReplaceIsReplace checks that a Replace taken in pieces, with
// pops in between, leaves the consumer with what one Replace leaves:
// the same objects and the same tombstones.
func TestStreamedReplaceIsReplace(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var cached []string
		queued := map[string]DeltaType{}
		var listed []string
		for i := range 30 {
			name := fmt.Sprintf("k%02d", i)
			if rng.IntN(2) == 0 {
				cached = append(cached, name)
			}
			if rng.IntN(4) == 0 {
				queued[name] = []DeltaType{Added, Updated, Deleted}[rng.IntN(3)]
			}
			if rng.IntN(3) > 0 {
				listed = append(listed, name)
			}
		}
		list := func() []*corev1.ConfigMap {
			var objs []*corev1.ConfigMap
			for _, name := range listed {
				objs = append(objs, streamCM(name, "2"))
			}
			return objs
		}

		whole := newFIFOSystem(t, cached, queued)
		if err := whole.fifo.Replace(list()); err != nil {
			t.Fatal(err)
		}
		whole.drain(t)

		pieces := newFIFOSystem(t, cached, queued)
		pieces.fifo.beginReplace()
		objs := list()
		for len(objs) > 0 {
			n := min(len(objs), 1+rng.IntN(5))
			if err := pieces.fifo.replaceItems(objs[:n]); err != nil {
				t.Fatal(err)
			}
			objs = objs[n:]
			for range rng.IntN(3) {
				if pieces.fifo.Len() > 0 {
					pieces.pop(t)
				}
			}
			if pieces.fifo.HasSynced() {
				t.Fatalf("seed %d: synced before the Replace ended", seed)
			}
		}
		if err := pieces.fifo.endReplace(); err != nil {
			t.Fatal(err)
		}
		pieces.drain(t)
		if !pieces.fifo.HasSynced() {
			t.Fatalf("seed %d: not synced after the Replace ended and the queue drained", seed)
		}
		if w, p := whole.state(), pieces.state(); !maps.Equal(w, p) {
			t.Fatalf("seed %d: store after Replace %v, after pieces %v", seed, w, p)
		}
		if !maps.Equal(whole.tombs, pieces.tombs) {
			t.Fatalf("seed %d: tombstones after Replace %v, after pieces %v", seed, whole.tombs, pieces.tombs)
		}
	}
}

// TestFreshStreamedReplace checks a Replace in pieces that begins with
// nothing queued or known: it reports itself fresh and tombstones
// nothing, unless another write comes while it runs, which it then
// tombstones as a Replace tombstones what it did not list.
func TestFreshStreamedReplace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cached  []string
		foreign string // added while the Replace runs, if not ""
		fresh   bool
		state   map[string]string
		tombs   map[string]bool
	}{
		{name: "fresh", fresh: true, state: map[string]string{"a": "2", "b": "2", "d": "2"}, tombs: map[string]bool{}},
		{name: "fresh, another write", foreign: "c", fresh: true, state: map[string]string{"a": "2", "b": "2", "d": "2"}, tombs: map[string]bool{"ns/c": true}},
		{name: "fresh, another write of a listed key", foreign: "a", fresh: true, state: map[string]string{"a": "q", "b": "2", "d": "2"}, tombs: map[string]bool{}},
		{name: "cached", cached: []string{"x"}, state: map[string]string{"a": "2", "b": "2", "d": "2"}, tombs: map[string]bool{"ns/x": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFIFOSystem(t, tc.cached, nil)
			if fresh := s.fifo.beginReplace(); fresh != tc.fresh {
				t.Fatalf("beginReplace reports fresh %v, want %v", fresh, tc.fresh)
			}
			if err := s.fifo.replaceItems([]*corev1.ConfigMap{streamCM("a", "2"), streamCM("b", "2")}); err != nil {
				t.Fatal(err)
			}
			s.pop(t)
			if tc.foreign != "" {
				if err := s.fifo.Add(streamCM(tc.foreign, "q")); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.fifo.replaceItems([]*corev1.ConfigMap{streamCM("d", "2")}); err != nil {
				t.Fatal(err)
			}
			if err := s.fifo.endReplace(); err != nil {
				t.Fatal(err)
			}
			s.drain(t)
			if !s.fifo.HasSynced() {
				t.Error("not synced after the Replace ended and the queue drained")
			}
			if got := s.state(); !maps.Equal(got, tc.state) {
				t.Errorf("store %v, want %v", got, tc.state)
			}
			if !maps.Equal(s.tombs, tc.tombs) {
				t.Errorf("tombstones %v, want %v", s.tombs, tc.tombs)
			}
		})
	}
}
