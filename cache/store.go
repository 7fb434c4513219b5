package cache

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// NamespaceIndex names the index every [Store] keeps without being asked:
// each key is filed under the part before its first slash, "" if none.
// For keys made by [MetaNamespaceKey] that is the object's namespace, ""
// for cluster-scoped objects. An indexer given under this name in
// [StoreOptions].Indexers or [Store.AddIndexers] takes the name over for
// the index queries; [Store.Select] keeps using the key-derived index.
const NamespaceIndex = "namespace"

// IndexFunc returns the values under which obj is filed in an index. It
// must be deterministic and must not keep or mutate obj: the store calls
// it again on the stored object to find the entries to remove. Duplicate
// values count once.
type IndexFunc[T any] func(obj T) ([]string, error)

// Indexers maps index names to index functions.
type Indexers[T any] map[string]IndexFunc[T]

// StoreOptions configures [NewStore]. The zero value is valid for API
// object types (those that satisfy [Object]).
type StoreOptions[T any] struct {
	// KeyFunc files objects. Default nil: [MetaNamespaceKey] when T
	// satisfies [Object]; for any other T every write fails with
	// [ErrNoKeyFunc], so give one.
	KeyFunc KeyFunc[T]
	// Indexers are custom indexes, in addition to [NamespaceIndex].
	// Default nil: none. More can be added with [Store.AddIndexers].
	Indexers Indexers[T]
	// Labels returns an object's labels for the label index used by
	// [Store.Select]; it must not mutate the object, and the map it
	// returns must not change while the object is stored. Default nil:
	// GetLabels when T has that method; otherwise the store keeps no
	// label index and Select accepts only selectors without
	// requirements.
	Labels func(obj T) map[string]string
}

// Store is Loom's cache: a keyed collection of objects, safe for
// concurrent use, with a namespace index, optional custom indexes and a
// label index that answers label-selector queries without scanning. It
// is the one type behind client-go's Store, ThreadSafeStore and Indexer.
//
// A Store holds T values as given (pointers, for API types) and never
// copies them. Objects passed to the writers become shared with every
// reader: nobody may mutate them afterwards. An informer's store has a
// single writer, the informer; readers get it as an [Indexer].
//
// Readers never wait for index maintenance longer than one Add, Update or
// Delete; Replace builds the new contents aside and swaps them in. The
// room of deleted objects is reused by later writes, and given back by the
// next Replace or once fewer than half of the slots are in use.
//
// The zero value is not usable; call [NewStore].
type Store[T any] struct {
	keyFunc  KeyFunc[T]
	labelsOf func(T) map[string]string // nil: no label index

	// writeMu serializes writers, so that Replace can build the new
	// state without blocking readers; mu guards what readers see.
	// Writers take writeMu, then mu to change st or the indexers.
	writeMu  sync.Mutex
	mu       sync.RWMutex
	indexers Indexers[T] // custom indexes
	names    []string    // keys of indexers, sorted
	st       state[T]
}

// slot holds one stored object. A free slot has an empty key.
type slot[T any] struct {
	key string
	obj T
}

// state is everything Replace swaps at once. Objects live in slots,
// addressed by a dense uint32 id, so the index sets hold 4-byte ids
// rather than keys.
type state[T any] struct {
	ids     map[string]uint32
	slots   []slot[T]
	free    []uint32
	ns      map[string]idRef            // namespace part of the key → ids
	indices map[string]map[string]idRef // index name → value → ids
	labels  map[string]map[string]idRef // label key → value → ids; nil without labels
	hint    int                         // the size Replace is building st for
}

// universe is the number of slots index sets are sized against: the
// final size while Replace builds a state, so that sets take their final
// form at once instead of passing through smaller ones.
func (st *state[T]) universe() int { return max(len(st.slots), st.hint) }

var (
	_ Indexer[int]    = (*Store[int])(nil)
	_ ReadWriter[int] = (*Store[int])(nil)
)

// NewStore returns an empty Store configured by opts.
func NewStore[T any](opts StoreOptions[T]) *Store[T] {
	s := &Store[T]{
		keyFunc:  defaultKeyFunc(opts.KeyFunc),
		labelsOf: defaultLabelsFunc(opts.Labels),
		indexers: maps.Clone(opts.Indexers),
	}
	if s.indexers == nil {
		s.indexers = Indexers[T]{}
	}
	s.names = slices.Sorted(maps.Keys(s.indexers))
	s.st = s.newState(0)
	return s
}

func (s *Store[T]) newState(n int) state[T] {
	st := state[T]{
		ids:     make(map[string]uint32, n),
		slots:   make([]slot[T], 0, n),
		hint:    n,
		ns:      map[string]idRef{},
		indices: make(map[string]map[string]idRef, len(s.names)),
	}
	for _, name := range s.names {
		st.indices[name] = map[string]idRef{}
	}
	if s.labelsOf != nil {
		st.labels = map[string]map[string]idRef{}
	}
	return st
}

// Add stores obj under its key, replacing any object there. It fails,
// changing nothing, with a [*KeyError] or an [*IndexError].
func (s *Store[T]) Add(obj T) error { return s.write(obj) }

// Update is Add.
func (s *Store[T]) Update(obj T) error { return s.write(obj) }

func (s *Store[T]) write(obj T) error {
	key, err := keyOf(s.keyFunc, obj)
	if err != nil {
		return err
	}
	return s.writeKey(key, obj)
}

// writeKey is Add for a caller that has obj's key already, made by the
// same key function: an informer, from its DeltaFIFO.
func (s *Store[T]) writeKey(key string, obj T) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.put(&s.st, key, obj)
}

// Delete removes the object with obj's key, if there is one; only the key
// of obj matters. It fails with a [*KeyError].
func (s *Store[T]) Delete(obj T) error {
	key, err := keyOf(s.keyFunc, obj)
	if err != nil {
		return err
	}
	s.deleteKey(key)
	return nil
}

// deleteKey is Delete by key.
func (s *Store[T]) deleteKey(key string) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(&s.st, key)
	s.shrink()
}

// shrink rebuilds the state once fewer than three quarters of its slots
// hold objects: Go maps and slices never give back room, so a store that
// held many objects and now holds fewer (an informer whose selector let
// most go, such as a shard's after the ring grew from one replica to
// three) would keep its peak size. A store keeps at most a third more
// room than it needs, and each rebuild costs about three times the
// deletes that led to it.
func (s *Store[T]) shrink() {
	if len(s.st.slots) < 256 || 4*len(s.st.ids) >= 3*len(s.st.slots) {
		return
	}
	if st, ok := s.rebuilt(); ok {
		s.st = st
	}
}

// rebuilt returns the state made anew with room for its objects only;
// false if it could not be (not expected: every object was indexed
// before). s.writeMu must be held.
func (s *Store[T]) rebuilt() (state[T], bool) {
	st := s.newState(len(s.st.ids))
	for _, sl := range s.st.slots {
		if sl.key == "" {
			continue
		}
		if err := s.put(&st, sl.key, sl.obj); err != nil {
			return state[T]{}, false
		}
	}
	st.hint = 0
	return st, true
}

// compact rebuilds the state if any of its slots is empty, so that it
// holds no more room than its objects need. Readers are not blocked while
// it rebuilds.
func (s *Store[T]) compact() {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if len(s.st.ids) == len(s.st.slots) {
		return
	}
	if st, ok := s.rebuilt(); ok {
		s.mu.Lock()
		s.st = st
		s.mu.Unlock()
	}
}

// Replace makes the store hold exactly objs (the last one wins when two
// share a key), rebuilding every index. Readers see the old contents or
// the new, never a mix, and are not blocked while the new contents are
// indexed. On error (a [*KeyError] or [*IndexError]) the store is
// unchanged.
func (s *Store[T]) Replace(objs []T) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	st := s.newState(len(objs))
	for _, obj := range objs {
		key, err := keyOf(s.keyFunc, obj)
		if err != nil {
			return err
		}
		if err := s.put(&st, key, obj); err != nil {
			return err
		}
	}
	st.hint = 0
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
	return nil
}

// AddIndexers adds custom indexes and files every stored object in them.
// It fails, adding none, with an error wrapping [ErrIndexExists] if a
// name is taken by a custom index, or with an [*IndexError]. It may be
// called at any time, though informers add their indexes before they
// start.
func (s *Store[T]) AddIndexers(indexers Indexers[T]) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	for name := range indexers {
		if _, ok := s.indexers[name]; ok {
			return fmt.Errorf("cache: AddIndexers %q: %w", name, ErrIndexExists)
		}
	}
	built := make(map[string]map[string]idRef, len(indexers))
	for name, fn := range indexers {
		idx := map[string]idRef{}
		for id, sl := range s.st.slots {
			if sl.key == "" {
				continue
			}
			vals, err := fn(sl.obj)
			if err != nil {
				return &IndexError{Index: name, Key: sl.key, Err: err}
			}
			for _, v := range uniq(vals) {
				addTo(idx, v, uint32(id), len(s.st.slots))
			}
		}
		built[name] = idx
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, fn := range indexers {
		s.indexers[name] = fn
		s.st.indices[name] = built[name]
	}
	s.names = slices.Sorted(maps.Keys(s.indexers))
	return nil
}

// put stores obj under key in st. It computes every index value before
// changing anything, so that an index error leaves st as it was.
func (s *Store[T]) put(st *state[T], key string, obj T) error {
	var vals [][]string
	if len(s.names) > 0 {
		vals = make([][]string, len(s.names))
		for i, name := range s.names {
			v, err := s.indexers[name](obj)
			if err != nil {
				return &IndexError{Index: name, Key: key, Err: err}
			}
			vals[i] = uniq(v)
		}
	}
	if id, ok := st.ids[key]; ok {
		old := st.slots[id].obj
		for i, name := range s.names {
			oldVals, _ := s.indexers[name](old) // filed without error before
			idx := st.indices[name]
			for _, v := range uniq(oldVals) {
				if !slices.Contains(vals[i], v) {
					removeFrom(idx, v, id)
				}
			}
			for _, v := range vals[i] {
				if !slices.Contains(oldVals, v) {
					addTo(idx, v, id, st.universe())
				}
			}
		}
		var oldL, newL map[string]string
		if s.labelsOf != nil {
			oldL, newL = s.labelsOf(old), s.labelsOf(obj)
		}
		if !maps.Equal(oldL, newL) { // most updates keep the labels
			for k, v := range oldL {
				if nv, ok := newL[k]; !ok || nv != v {
					st.removeLabel(k, v, id)
				}
			}
			for k, v := range newL {
				if ov, ok := oldL[k]; !ok || ov != v {
					st.addLabel(k, v, id, st.universe())
				}
			}
		}
		st.slots[id].obj = obj
		return nil
	}

	var id uint32
	if n := len(st.free); n > 0 {
		id = st.free[n-1]
		st.free = st.free[:n-1]
		st.slots[id] = slot[T]{key: key, obj: obj}
	} else {
		id = uint32(len(st.slots))
		st.slots = append(st.slots, slot[T]{key: key, obj: obj})
	}
	st.ids[key] = id
	addTo(st.ns, namespaceOf(key), id, st.universe())
	for i, name := range s.names {
		idx := st.indices[name]
		for _, v := range vals[i] {
			addTo(idx, v, id, st.universe())
		}
	}
	if s.labelsOf != nil {
		for k, v := range s.labelsOf(obj) {
			st.addLabel(k, v, id, st.universe())
		}
	}
	return nil
}

// remove deletes key from st and from every index, if present.
func (s *Store[T]) remove(st *state[T], key string) {
	id, ok := st.ids[key]
	if !ok {
		return
	}
	old := st.slots[id].obj
	removeFrom(st.ns, namespaceOf(key), id)
	for _, name := range s.names {
		oldVals, _ := s.indexers[name](old)
		for _, v := range uniq(oldVals) {
			removeFrom(st.indices[name], v, id)
		}
	}
	if s.labelsOf != nil {
		for k, v := range s.labelsOf(old) {
			st.removeLabel(k, v, id)
		}
	}
	delete(st.ids, key)
	st.slots[id] = slot[T]{}
	st.free = append(st.free, id)
}

func (st *state[T]) addLabel(k, v string, id uint32, universe int) {
	vals := st.labels[k]
	if vals == nil {
		vals = map[string]idRef{}
		st.labels[strings.Clone(k)] = vals // see addTo
	}
	addTo(vals, v, id, universe)
}

func (st *state[T]) removeLabel(k, v string, id uint32) {
	vals := st.labels[k]
	if vals == nil {
		return
	}
	removeFrom(vals, v, id)
	if len(vals) == 0 {
		delete(st.labels, k)
	}
}

// uniq returns vals without duplicates, copying only if it has some.
func uniq(vals []string) []string {
	for i := 1; i < len(vals); i++ {
		if slices.Contains(vals[:i], vals[i]) {
			out := make([]string, 0, len(vals))
			for _, v := range vals {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
			return out
		}
	}
	return vals
}

// Get returns the object stored under key, and whether there is one.
func (s *Store[T]) Get(key string) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.st.ids[key]
	if !ok {
		var zero T
		return zero, false
	}
	return s.st.slots[id].obj, true
}

// List returns every stored object, in no particular order.
func (s *Store[T]) List() []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]T, 0, len(s.st.ids))
	for _, sl := range s.st.slots {
		if sl.key != "" {
			out = append(out, sl.obj)
		}
	}
	return out
}

// ListKeys returns every key, in no particular order.
func (s *Store[T]) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.st.ids))
	for _, sl := range s.st.slots {
		if sl.key != "" {
			out = append(out, sl.key)
		}
	}
	return out
}

// Len returns the number of stored objects.
func (s *Store[T]) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.st.ids)
}

// lookup returns the value map of index name. The caller holds mu.
func (s *Store[T]) lookup(name string) (map[string]idRef, error) {
	if idx, ok := s.st.indices[name]; ok {
		return idx, nil
	}
	if name == NamespaceIndex {
		return s.st.ns, nil
	}
	return nil, fmt.Errorf("cache: index %q: %w", name, ErrNoSuchIndex)
}

// Index returns the stored objects that share at least one value of
// index name with obj, each once. See [IndexReader].
func (s *Store[T]) Index(name string, obj T) ([]T, error) {
	var vals []string
	if fn, ok := s.indexerFunc(name); ok {
		v, err := fn(obj)
		if err != nil {
			return nil, &IndexError{Index: name, Err: err}
		}
		vals = uniq(v)
	} else if name == NamespaceIndex {
		key, err := keyOf(s.keyFunc, obj)
		if err != nil {
			return nil, err
		}
		vals = []string{namespaceOf(key)}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	if len(vals) == 1 {
		return s.objects(idx[vals[0]]), nil
	}
	var out []T
	seen := map[uint32]struct{}{}
	for _, v := range vals {
		for id := range idx[v].all() {
			if _, dup := seen[id]; !dup {
				seen[id] = struct{}{}
				out = append(out, s.st.slots[id].obj)
			}
		}
	}
	return out, nil
}

func (s *Store[T]) indexerFunc(name string) (IndexFunc[T], bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn, ok := s.indexers[name]
	return fn, ok
}

// objects returns the objects of set. The caller holds mu.
func (s *Store[T]) objects(set idRef) []T {
	out := make([]T, 0, set.len())
	for id := range set.all() {
		out = append(out, s.st.slots[id].obj)
	}
	return out
}

// IndexKeys returns the keys filed under value in index name.
func (s *Store[T]) IndexKeys(name, value string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	set := idx[value]
	out := make([]string, 0, set.len())
	for id := range set.all() {
		out = append(out, s.st.slots[id].key)
	}
	return out, nil
}

// ListIndexFuncValues returns the values under which index name holds at
// least one object, in no particular order; nil for an unknown index.
func (s *Store[T]) ListIndexFuncValues(name string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, err := s.lookup(name)
	if err != nil {
		return nil
	}
	return slices.AppendSeq(make([]string, 0, len(idx)), maps.Keys(idx))
}

// ByIndex returns the objects filed under value in index name.
func (s *Store[T]) ByIndex(name, value string) ([]T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return s.objects(idx[value]), nil
}

// Select returns the objects in namespace ("" for every namespace) whose
// labels match selector (nil means everything), in no particular order.
// The selector is evaluated through its Requirements, as every selector
// of k8s.io/apimachinery/pkg/labels defines its Matches.
//
// It takes as candidates the smallest set among the namespace (when
// given) and each requirement the label index can answer directly: "=",
// "==" and "in" (the objects with one of the values) and "exists" (the
// objects with the key). It checks each candidate against the other
// requirements by index membership ("!=" and "notin" are the complement
// of sets, "!" of the key's sets) and reads the object's labels only for
// "gt", "lt", and "exists" or "!" on keys with many values. Only a
// selector with no requirement of the first kind and no namespace makes
// it visit every object. Its cost is thus proportional to the smallest
// candidate set, not to the size of the store.
//
// It fails with [ErrNoLabels] for a selector with requirements on a store
// without a label function.
func (s *Store[T]) Select(namespace string, selector labels.Selector) ([]T, error) {
	if selector == nil {
		selector = labels.Everything()
	}
	reqs, selectable := selector.Requirements()
	if !selectable {
		return nil, nil // labels.Nothing()
	}
	if len(reqs) > 0 && s.labelsOf == nil {
		return nil, fmt.Errorf("cache: Select %q: %w", selector.String(), ErrNoLabels)
	}

	s.mu.RLock()
	defer s.mu.RUnlock()

	// The candidates: the union of src, whose sets are disjoint (an
	// object has one value per label key), or every object if src is nil.
	var src []idRef
	size := len(s.st.ids)
	nsSet, inNS := idRef{}, namespace != "" // inNS: nsSet is checked per candidate unless it is src
	if inNS {
		if nsSet = s.st.ns[namespace]; nsSet.len() == 0 {
			return nil, nil
		}
		src, size = []idRef{nsSet}, nsSet.len()
	}
	plans := make([]reqPlan, len(reqs))
	chosen := -1 // the plan src comes from, or -1
	for i := range reqs {
		p := &plans[i]
		s.plan(p, &reqs[i])
		if !p.source {
			continue
		}
		if p.size == 0 {
			return nil, nil
		}
		if p.size < size || src == nil {
			src, size, chosen = p.sets, p.size, i
		}
	}
	if chosen < 0 {
		inNS = false // src is the namespace set, or everything without one
	}

	out := make([]T, 0, size)
	check := func(id uint32) {
		if inNS && !nsSet.contains(id) {
			return
		}
		var lbls labels.Set
		for i := range plans {
			if i == chosen {
				continue
			}
			p := &plans[i]
			if p.req != nil {
				if lbls == nil {
					lbls = labels.Set(s.labelsOf(s.st.slots[id].obj))
					if lbls == nil {
						lbls = labels.Set{}
					}
				}
				if !p.req.Matches(lbls) {
					return
				}
				continue
			}
			in := false
			for _, set := range p.sets {
				if set.contains(id) {
					in = true
					break
				}
			}
			if in == p.negate {
				return
			}
		}
		out = append(out, s.st.slots[id].obj)
	}
	if src == nil {
		for id := range s.st.slots {
			if s.st.slots[id].key != "" {
				check(uint32(id))
			}
		}
		return out, nil
	}
	for _, set := range src {
		for id := range set.all() {
			check(id)
		}
	}
	return out, nil
}

// maxProbeSets is the most index sets a requirement is checked against
// per candidate; beyond it the candidate's labels are read instead.
const maxProbeSets = 8

// reqPlan is how Select evaluates one requirement: an object matches if
// it is in one of sets (in none, if negate), or, when req is set, if
// req.Matches its labels.
type reqPlan struct {
	sets   []idRef
	negate bool
	req    *labels.Requirement
	source bool // sets can serve as Select's candidates
	size   int  // the union's size, when source
}

// plan fills p for r. The caller holds mu.
func (s *Store[T]) plan(p *reqPlan, r *labels.Requirement) {
	vals := s.st.labels[r.Key()]
	switch op := r.Operator(); op {
	case selection.Equals, selection.DoubleEquals, selection.In, selection.NotEquals, selection.NotIn:
		for _, v := range uniq(r.ValuesUnsorted()) {
			if set := vals[v]; set.len() > 0 {
				p.sets = append(p.sets, set)
				p.size += set.len()
			}
		}
		p.negate = op == selection.NotEquals || op == selection.NotIn
		p.source = !p.negate
	case selection.Exists, selection.DoesNotExist:
		for _, set := range vals {
			p.sets = append(p.sets, set)
			p.size += set.len()
		}
		p.negate = op == selection.DoesNotExist
		p.source = !p.negate
		if len(p.sets) > maxProbeSets {
			p.req = r
		}
	default: // gt, lt
		p.req = r
	}
}
