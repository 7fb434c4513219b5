package intern

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Options tell Loom's decoders (internal/protodec for protobuf,
// internal/jsondec for JSON) how to use a table. The zero value decodes
// every object into values of its own.
type Options struct {
	// Share, when set, makes identical parts of the objects decoded with
	// the same table one value: byte blobs of 16 bytes or more (the
	// managed-fields blobs), and, with Structs, lists of structs
	// (containers, volumes, owner references), pointers to structs,
	// string maps (labels, annotations) and resource lists. Structs
	// holding a time (conditions, container statuses) are never shared.
	// The shared parts must never be changed in place.
	Share   *Table
	Structs bool
	// Stats, when set, counts how often each field's values were found
	// in Share, and a field whose values turn out mostly unique is no
	// longer looked up by decoders given the same Stats. Nil: every
	// field is always looked up.
	Stats *Stats
	// Strings, when set, gives decoders one copy of each short string
	// that many objects hold (see [Strings]), for string fields, string
	// map keys and values, and the keys and string values of
	// unstructured objects. With Stats, a field whose strings turn out
	// mostly unique is no longer looked up: its strings go to the
	// object's own string block, as without Strings.
	Strings *Strings
	// SkipManagedFields leaves metadata.managedFields out of every
	// ObjectMeta.
	SkipManagedFields bool
	// Sizer, when set, keeps each decoded object's first string block no
	// larger than what the objects decoded before it kept suggests (see
	// [Sizer]). Nil: blocks start at a fixed size and grow.
	Sizer *Sizer
	// Cached, when set, is called before each item of a list, and each
	// ADDED or MODIFIED event's object (a streaming list's items are
	// ADDED events), is decoded. It returns nil when no object can be
	// known (an informer's: with an empty cache, or during a first list),
	// and the object is decoded without more ado. Otherwise it returns a
	// lookup, which the decoder calls with the object's namespace, name
	// and resourceVersion, read from the wire (views of the response:
	// valid only during the call), and which returns the object it holds under that key, or nil. When that
	// object has the resourceVersion asked for, it stands for a list item
	// or an ADDED event's object, which is not decoded. Otherwise, and
	// for a MODIFIED event's object, it is the object's previous version:
	// the decoder is given it as Prior. An informer answers with the
	// object it caches under the key, during a list; outside a list,
	// only with an object at another resourceVersion. Nil: every item is
	// decoded.
	Cached func() func(namespace, name, resourceVersion string) any
	// Prior, when set, is the object's previous version, held by a cache
	// (see Cached), so immutable. With Share, the decoder gives the new
	// object the parts of Prior whose encoding it finds unchanged, instead
	// of decoding them again: managed-fields blobs, and with Structs, on
	// JSON, the parts of typed objects that Structs shares and the nested
	// objects and arrays of unstructured ones. A relist that brings every
	// object back changed in one field, or an update of one field, then
	// makes little garbage. Nil: nothing is taken from a previous
	// version.
	Prior any
}

type optionsKey struct{}

// WithOptions returns a context that asks decoders reading a response
// for it to use o.
func WithOptions(ctx context.Context, o Options) context.Context {
	return context.WithValue(ctx, optionsKey{}, o)
}

// OptionsFrom returns the options ctx carries (the zero value if none).
func OptionsFrom(ctx context.Context) Options {
	if ctx == nil {
		return Options{}
	}
	o, _ := ctx.Value(optionsKey{}).(Options)
	return o
}

// A field is looked up at least warmup times, and then only while at
// least one lookup in hitShare finds its value. The warmup is long since
// the replicas of one workload can lie far apart in a list.
const (
	warmup   = 4096
	hitShare = 16
)

// MinShared is the smallest value worth a table entry (an entry costs
// about as much). It also keeps values out of the runtime's tiny
// allocator, whose batching could keep dead entries alive.
const MinShared = 16

// Stats are the lookup counts of one user of the table (an informer),
// per [Field]. The zero value is ready to use. The counts of numbered
// fields sit in a slice as long as the highest number met (8 bytes per
// field the process's decoders describe).
type Stats struct {
	mu    sync.Mutex
	slots atomic.Pointer[[]*counter] // by Field.slot; replaced, never changed, under mu
	named sync.Map                   // name → *counter
}

// A Field names a field for [Stats]: by a number a decoder took for its
// description of the field ([NewField]), or by the field's name ([Named]:
// a key of unstructured objects). Naming a field costs no allocation, and
// counting a numbered one no map lookup.
type Field struct {
	slot int32 // > 0 for a NewField
	name string
}

var lastSlot atomic.Int32

// NewField returns a new numbered Field. A decoder takes one per field it
// describes, once: the numbers are never given back.
func NewField() Field { return Field{slot: lastSlot.Add(1)} }

// Named names a field by its name.
func Named(name string) Field { return Field{name: name} }

type counter struct {
	tries, hits       atomic.Int64
	strTries, strHits atomic.Int64 // lookups in Strings
	sizer             Sizer        // sizes the string blocks of the field's values decoded on a miss
}

func (s *Stats) of(field Field) *counter {
	if field.slot > 0 {
		if p := s.slots.Load(); p != nil && int(field.slot) < len(*p) {
			if c := (*p)[field.slot]; c != nil {
				return c
			}
		}
		return s.newSlot(int(field.slot))
	}
	if c, ok := s.named.Load(field.name); ok {
		return c.(*counter)
	}
	// A name may lie in the string block of the object being decoded,
	// which Stats must not keep alive.
	c, _ := s.named.LoadOrStore(strings.Clone(field.name), &counter{})
	return c.(*counter)
}

// newSlot returns the counter of a numbered field first met, adding it to
// a copy of s.slots.
func (s *Stats) newSlot(slot int) *counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur []*counter
	if p := s.slots.Load(); p != nil {
		cur = *p
	}
	if slot < len(cur) && cur[slot] != nil {
		return cur[slot]
	}
	n := len(cur)
	if slot >= n {
		n = max(slot+1, 2*n)
	}
	next := make([]*counter, n)
	copy(next, cur)
	c := &counter{}
	next[slot] = c
	s.slots.Store(&next)
	return c
}

// Sharing reports whether the values of field are still looked up.
func (o *Options) Sharing(field Field) bool {
	if o.Stats == nil {
		return true
	}
	c := o.Stats.of(field)
	t := c.tries.Load()
	return t < warmup || c.hits.Load()*hitShare >= t
}

// A field's strings are looked up in Strings at least stringWarmup times,
// and then only while at least one lookup in stringHitShare finds its
// string. The warmup is short, since a string that is not found gets an
// allocation of its own, outside the object's string block, for as long
// as the object lives.
const (
	stringWarmup   = 256
	stringHitShare = 4
)

// String returns b as a string held in o.Strings, counting the lookup for
// field, and true; or false when b is not to be looked up (no Strings,
// b empty or longer than [MaxInterned], or field's strings mostly
// unique): the caller copies b itself.
func (o *Options) String(field Field, b []byte) (string, bool) {
	c, ok := o.internString(field, b)
	if !ok {
		return "", false
	}
	s, found := o.Strings.Get(b)
	c.countString(found)
	return s, true
}

// Boxed is String for a string held in an interface (a value of an
// unstructured object): the interface shares the string's box, and
// making it allocates nothing.
func (o *Options) Boxed(field Field, b []byte) (any, bool) {
	c, ok := o.internString(field, b)
	if !ok {
		return nil, false
	}
	v, found := o.Strings.Boxed(b)
	c.countString(found)
	return v, true
}

// internString reports whether b is to be looked up in o.Strings, and
// returns field's counter (nil without Stats).
func (o *Options) internString(field Field, b []byte) (*counter, bool) {
	if o.Strings == nil || len(b) == 0 || len(b) > MaxInterned {
		return nil, false
	}
	if o.Stats == nil {
		return nil, true
	}
	c := o.Stats.of(field)
	t := c.strTries.Load()
	return c, t < stringWarmup || c.strHits.Load()*stringHitShare >= t
}

// countString counts a lookup in Strings; c may be nil.
func (c *counter) countString(found bool) {
	if c == nil {
		return
	}
	c.strTries.Add(1)
	if found {
		c.strHits.Add(1)
	}
}

// FieldSizer returns the Sizer for the string blocks of field's values
// that are decoded on their own (a miss in the table, decoded to be
// put in it), or nil without Stats.
func (o *Options) FieldSizer(field Field) *Sizer {
	if o.Stats == nil {
		return nil
	}
	return &o.Stats.of(field).sizer
}

// Lookup returns k's value in the table, counting the try for field. When
// the table has none, put says what the caller does: with put, it decodes
// a value of its own for the table and puts it there; without, the value
// has not been met lately (it may be unique), and the caller decodes it as
// it decodes what is not shared, into the object's own memory, at no cost
// to the table. A value met again while the table remembers its key
// counts as found.
func (o *Options) Lookup(field Field, k Key) (v unsafe.Pointer, put bool) {
	v = o.Share.Get(k)
	if v == nil {
		put = o.Share.MetBefore(k)
	}
	if o.Stats != nil {
		c := o.Stats.of(field)
		c.tries.Add(1)
		if v != nil || put {
			c.hits.Add(1)
		}
	}
	return v, put
}

var timeTypes = map[reflect.Type]bool{
	reflect.TypeFor[metav1.Time]():      true,
	reflect.TypeFor[metav1.MicroTime](): true,
	reflect.TypeFor[time.Time]():        true,
}

var objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()

var holdsTime sync.Map // reflect.Type → bool

// HoldsTime reports whether a value of type t contains a time, directly
// or through its fields, pointers, slices, arrays or map values, other
// than the timestamps of an object's metadata (which a template, such as
// a volume claim template inside a Pod's volumes, holds but leaves
// empty). Such values (conditions, container statuses, managed-fields
// entries) record one object's history, are almost never identical
// across objects, and are not worth looking up: decoders never share
// them.
func HoldsTime(t reflect.Type) bool {
	if v, ok := holdsTime.Load(t); ok {
		return v.(bool)
	}
	v := holds(t, map[reflect.Type]bool{})
	holdsTime.Store(t, v)
	return v
}

func holds(t reflect.Type, seen map[reflect.Type]bool) bool {
	if timeTypes[t] {
		return true
	}
	if seen[t] || t == objectMetaType {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return holds(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if holds(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}
