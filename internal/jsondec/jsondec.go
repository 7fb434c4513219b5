// Package jsondec parses JSON into the generic form unstructured objects
// use (map[string]interface{}, []interface{}, string, int64, float64,
// bool, nil), faster than encoding/json's reflection-driven path.
//
// # Semantics
//
// The result equals what k8s.io/apimachinery/pkg/util/json.Unmarshal (the
// decoder behind unstructured.Unstructured) gives for the same input:
// numbers without a '.' that fit in int64 become int64, other numbers
// float64 (a number that overflows float64 is an error); a repeated key
// keeps its last value; invalid UTF-8 and unpaired surrogate escapes become
// U+FFFD; nesting deeper than 10,000 is an error; anything after the value
// other than white space is an error. A differential fuzz test checks the
// equivalence.
//
// # Strings
//
// Strings without escapes are slices of one copy of the input made per
// call, as in internal/protodec: keeping one string keeps that copy alive.
package jsondec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/loom-k8s/loom/internal/intern"
)

const maxDepth = 10000

// SyntaxError reports malformed JSON. It never quotes the input.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("jsondec: %s at offset %d", e.Msg, e.Offset)
}

// ErrNotObject is returned by [Object] when the input is valid JSON but not
// an object.
var ErrNotObject = errors.New("jsondec: value is not a JSON object")

// Object parses data, which must hold one JSON object, into a map.
//
// The objects of a top-level "items" array (the items of a list) each get
// string blocks of their own, so that keeping one item does not keep the
// strings of the whole list alive.
func Object(data []byte) (map[string]interface{}, error) {
	return ObjectWith(data, intern.Options{})
}

// ObjectWith is [Object] with options. With o.Share and o.Structs, an
// object or array below the top level whose JSON text was decoded before
// is taken from the table (under a key whose values are still looked up,
// see [intern.Options]): objects of one shape share their specs, labels
// and lists. The items of a list are never shared whole. With
// o.SkipManagedFields, metadata.managedFields of the object (or of each
// item of a list) is left out.
func ObjectWith(data []byte, o intern.Options) (map[string]interface{}, error) {
	p := parser{data: data, opts: o, sizer: o.Sizer}
	p.skipSpace()
	if p.i >= len(p.data) {
		return nil, p.errf("unexpected end of input")
	}
	if p.data[p.i] != '{' {
		// Still validate, so that garbage and "not an object" differ.
		if _, err := p.value(0); err != nil {
			return nil, err
		}
		if err := p.end(); err != nil {
			return nil, err
		}
		return nil, ErrNotObject
	}
	if o.Prior != nil && o.Structs && o.Share != nil {
		p.prior = priorObject(o.Prior)
	}
	m, err := p.object(0, "")
	if err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	p.learn()
	return m, nil
}

// keysField names the keys of unstructured objects, and elemsField the
// strings in their arrays, for the lookup counts of intern.Options.String.
// A string that is the value of a key is counted under the key's name.
var keysField, elemsField = intern.NewField(), intern.NewField()

type parser struct {
	data  []byte
	arena []byte // the current block strings are copied into
	i     int
	opts  intern.Options

	kept   int // string bytes copied into blocks so far
	arenas int // string blocks allocated (tests)
	// arenaBytes is their total size (tests)
	arenaBytes int

	// sizer, set on the parser of one object (the top-level value, or
	// an item of a top-level list), sizes its string blocks; a list's
	// parser hands it to its items.
	sizer    *intern.Sizer
	hasItems bool // items of a top-level list were parsed by parsers of their own

	// entries holds the entries of the objects being parsed (a stack:
	// an object's own follow those of the objects it is in), so that
	// each map is made at its final size and never grows.
	entries *[]entry

	// local holds parts of this object that it met for the first time
	// and decoded in place (see shared), so that the same part met again
	// in this object (a template's labels that repeat the object's own)
	// is one value, at no cost to the table. Taken from localPool when
	// first needed (a parser is often on the heap: it should stay small),
	// and given back by learn, when the object is done.
	local  *[16]localPart
	nLocal int

	// next names the strings of the slice or map about to be decoded,
	// for Strings' counts: set by a struct field (see take).
	next fieldStrings

	// prior is, in an unstructured object decoded with a previous
	// version (intern.Options.Prior), that version's value at the place
	// of the value about to be parsed, or nil (see sharedValue).
	prior any
	// priorPtr is the same for typed objects: where the previous version
	// holds the value about to be decoded, of the same type, or nil (see
	// shared).
	priorPtr unsafe.Pointer
}

type localPart struct {
	k intern.Key
	v unsafe.Pointer // a map, an array or a struct
}

var localPool = sync.Pool{New: func() any { return new([16]localPart) }}

// remember records that the part k of this object is at v.
func (p *parser) remember(k intern.Key, v unsafe.Pointer) {
	if v == nil {
		return
	}
	if p.local == nil {
		p.local, p.nLocal = localPool.Get().(*[16]localPart), 0
	}
	p.local[p.nLocal%len(p.local)] = localPart{k, v}
	p.nLocal++
}

// recall returns the part k of this object that remember recorded, or nil.
func (p *parser) recall(k intern.Key) unsafe.Pointer {
	if p.local == nil {
		return nil
	}
	for _, l := range p.local[:min(p.nLocal, len(p.local))] {
		if l.k == k {
			return l.v
		}
	}
	return nil
}

// forget gives the parts remember recorded back to the pool.
func (p *parser) forget() {
	if p.local != nil {
		clear(p.local[:]) // the pool must not keep the parts alive
		localPool.Put(p.local)
		p.local, p.nLocal = nil, 0
	}
}

type entry struct {
	k string
	v any
}

// entryPool holds the parsers' entry stacks.
var entryPool = sync.Pool{New: func() any { return new([]entry) }}

// learn tells the sizer what this object kept. A list's parser, whose
// items had parsers of their own, has nothing to teach.
func (p *parser) learn() {
	p.forget()
	if !p.hasItems {
		p.sizer.Learn(len(p.data), p.kept)
	}
}

// Strings are copied into blocks that start at firstBlock bytes and double
// up to maxBlock. Copying only string bytes, rather than keeping one copy
// of the whole JSON text, keeps a cached object from holding its keys'
// quotes, punctuation and numbers. A new block is also never larger than
// the string bytes the rest of the input is likely to hold: what is left
// of the input, in the proportion of kept bytes to input read so far (a
// struct's keys and its numbers are not kept), with some slack, once a
// first block's worth has been read. With a Sizer that has learnt from
// earlier objects, the first block is no larger than its guess, so that a
// small object whose encoding is mostly parts taken from the table (or
// numbers) does not hold a block it cannot fill. An estimate too low costs
// one more small block; too high, memory that no string ever uses.
const (
	firstBlock = 512
	maxBlock   = 4096
	slack      = 64
)

// keep returns a string copy of b, a sub-slice of p.data, from the
// current block (a new one when it is full). Blocks are only appended to,
// so the strings never change.
func (p *parser) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(p.arena)-len(p.arena) < len(b) {
		off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(p.data))))
		rest := len(p.data) - off
		if off >= firstBlock { // enough read to go by
			rest = min(rest, int(int64(rest)*int64(p.kept)/int64(off))+slack)
		}
		size := min(max(2*cap(p.arena), firstBlock), maxBlock, rest)
		if g := p.sizer.Guess(rest); g > 0 && p.arenas == 0 {
			size = min(size, g)
		}
		// slices.Grow rounds the capacity up to the allocation's size
		// class, so that the rounding is room for strings, not waste.
		p.arena = slices.Grow([]byte(nil), max(len(b), size))
		p.arenas++
		p.arenaBytes += cap(p.arena)
	}
	p.kept += len(b)
	n := len(p.arena)
	p.arena = append(p.arena, b...)
	return unsafe.String(&p.arena[n], len(b))
}

// view returns p.data[start:end] as a string without copying, for values
// that are parsed and dropped (numbers); it must not be kept.
func (p *parser) view(start, end int) string {
	if start == end {
		return ""
	}
	return unsafe.String(&p.data[start], end-start)
}

func (p *parser) errf(format string, args ...any) error {
	return &SyntaxError{Offset: p.i, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) end() error {
	p.skipSpace()
	if p.i != len(p.data) {
		return p.errf("invalid character after top-level value")
	}
	return nil
}

func (p *parser) skipSpace() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (interface{}, error) {
	p.skipSpace()
	if p.i >= len(p.data) {
		return nil, p.errf("unexpected end of input")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		m, err := p.object(depth, "")
		if err != nil {
			return nil, err
		}
		return m, nil
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.valueFor(elemsField)
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return nil, p.errf("invalid character %q looking for beginning of value", c)
	}
}

func (p *parser) literal(lit string) error {
	if len(p.data)-p.i < len(lit) || string(p.data[p.i:p.i+len(lit)]) != lit {
		return p.errf("invalid literal")
	}
	p.i += len(lit)
	return nil
}

// object parses the object at p.i, leaving out the key skip.
func (p *parser) object(depth int, skip string) (map[string]interface{}, error) {
	if depth >= maxDepth {
		return nil, p.errf("exceeded max depth")
	}
	if p.entries == nil {
		p.entries = entryPool.Get().(*[]entry)
		defer func() {
			clear(*p.entries)
			*p.entries = (*p.entries)[:0]
			entryPool.Put(p.entries)
			p.entries = nil
		}()
	}
	prior, _ := p.prior.(map[string]any)
	p.prior = nil
	p.i++ // '{'
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return map[string]interface{}{}, nil
	}
	start := len(*p.entries)
	for {
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, p.errf("expected a string for an object key")
		}
		k, err := p.strFor(keysField)
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, p.errf("expected ':' after object key")
		}
		p.i++
		var v any
		p.skipSpace()
		if prior != nil {
			p.prior = prior[k]
		}
		old, isStr := p.prior.(string)
		switch {
		case skip != "" && k == skip:
			_, err = p.skipValue(depth + 1)
			v = skipped
		case isStr && p.sameString(old):
			// Unchanged since the previous version: its value, whose
			// string and box are already made.
			v = p.prior
		case depth == 0 && k == "items" && p.i < len(p.data) && p.data[p.i] == '[':
			v, err = p.items()
		case depth == 0 && k == "metadata" && p.i < len(p.data) && p.data[p.i] == '{':
			// An object's metadata holds its UID: never worth looking up
			// whole. Its labels, annotations, owner references and
			// managed fields are, one by one.
			drop := ""
			if p.opts.SkipManagedFields {
				drop = "managedFields"
			}
			v, err = p.object(depth+1, drop)
		case p.opts.Strings != nil && p.i < len(p.data) && p.data[p.i] == '"':
			v, err = p.valueFor(intern.Named(k))
		case p.opts.Structs && p.opts.Share != nil:
			v, err = p.sharedValue(k, depth+1)
		default:
			v, err = p.value(depth + 1)
		}
		p.prior = nil
		if err != nil {
			return nil, err
		}
		if v != skipped {
			*p.entries = append(*p.entries, entry{k, v})
		}
		done, err := p.objectNext()
		if err != nil {
			return nil, err
		}
		if done {
			es := (*p.entries)[start:]
			m := make(map[string]interface{}, len(es))
			for _, e := range es {
				m[e.k] = e.v
			}
			clear(es)
			*p.entries = (*p.entries)[:start]
			return m, nil
		}
	}
}

func (p *parser) array(depth int) ([]interface{}, error) { return p.arrayOf(depth, -1) }

// arrayOf parses the array at p.i, which has n elements (-1: not known,
// counted first so that the array is allocated at its size).
func (p *parser) arrayOf(depth, n int) ([]interface{}, error) {
	if depth >= maxDepth {
		return nil, p.errf("exceeded max depth")
	}
	prior, _ := p.prior.([]any)
	p.prior = nil
	open := p.i
	p.i++ // '['
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return []interface{}{}, nil
	}
	if n < 0 {
		q := parser{data: p.data, i: open}
		n, _ = q.valueNoAlloc(depth)
	}
	a := make([]interface{}, 0, n)
	for {
		var v any
		var err error
		if len(a) < len(prior) {
			v, err = p.priorElem(prior[len(a)], depth+1)
		} else {
			v, err = p.value(depth + 1)
		}
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if done, err := p.arrayNext(); err != nil || done {
			return a, err
		}
	}
}

// str parses a string at p.i (which holds '"').
func (p *parser) str() (string, error) {
	p.i++
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := p.keep(p.data[start:p.i])
			p.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return p.slowStr(start)
		case c < 0x20:
			return "", p.errf("invalid control character in string")
		}
		p.i++
	}
	return "", p.errf("unexpected end of input in string")
}

// strFor is str for a string of field: from p.opts.Strings when field's
// strings are still looked up there, else copied into the block.
func (p *parser) strFor(field intern.Field) (string, error) {
	if p.opts.Strings == nil {
		return p.str()
	}
	b, v, err := p.internable()
	if b == nil {
		return v, err
	}
	if s, ok := p.opts.String(field, b); ok {
		return s, nil
	}
	return p.keep(b), nil
}

// valueFor is strFor for a string that an interface holds (a value of an
// unstructured object): one from p.opts.Strings shares its box, so that
// the interface costs no allocation.
func (p *parser) valueFor(field intern.Field) (any, error) {
	if p.opts.Strings == nil {
		return p.str()
	}
	b, v, err := p.internable()
	if b == nil {
		return v, err
	}
	if s, ok := p.opts.Boxed(field, b); ok {
		return s, nil
	}
	return p.keep(b), nil
}

// internable reads the string at p.i. It returns its bytes, a view of
// p.data, when it can be looked up; otherwise the string itself: empty,
// or a copy of its own (it held escapes), or an error.
func (p *parser) internable() (b []byte, s string, err error) {
	start := p.i + 1
	v, err := p.strView()
	if err != nil || v == "" || unsafe.StringData(v) != &p.data[start] {
		return nil, v, err
	}
	return p.data[start : start+len(v)], "", nil
}

// strView is str for a string that is only looked at, never kept: without
// escapes or non-ASCII bytes it is a view of p.data, not a copy.
func (p *parser) strView() (string, error) {
	p.i++
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := p.view(start, p.i)
			p.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return p.slowStr(start)
		case c < 0x20:
			return "", p.errf("invalid control character in string")
		}
		p.i++
	}
	return "", p.errf("unexpected end of input in string")
}

// slowStr handles escapes and non-ASCII bytes (which must be valid UTF-8
// or are replaced by U+FFFD, as encoding/json does).
func (p *parser) slowStr(start int) (string, error) {
	buf := make([]byte, 0, p.i-start+16)
	buf = append(buf, p.data[start:p.i]...)
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			// buf is not touched again, so it can back the string.
			return unsafe.String(unsafe.SliceData(buf), len(buf)), nil
		case c < 0x20:
			return "", p.errf("invalid control character in string")
		case c == '\\':
			if p.i+1 >= len(p.data) {
				return "", p.errf("unexpected end of input in string escape")
			}
			e := p.data[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", p.errf("invalid \\u escape")
				}
				if utf16.IsSurrogate(r) {
					// A pair, or U+FFFD.
					r2 := rune(-1)
					if p.i+1 < len(p.data) && p.data[p.i] == '\\' && p.data[p.i+1] == 'u' {
						save := p.i
						p.i += 2
						if x, ok := p.hex4(); ok {
							r2 = x
						} else {
							return "", p.errf("invalid \\u escape")
						}
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							buf = utf8.AppendRune(buf, dec)
							continue
						}
						p.i = save // not a pair: the second escape stands alone
					}
					buf = utf8.AppendRune(buf, utf8.RuneError)
					continue
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", p.errf("invalid escape character %q", e)
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
			} else {
				buf = append(buf, p.data[p.i:p.i+size]...)
			}
			p.i += size
		}
	}
	return "", p.errf("unexpected end of input in string")
}

func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	p.i += 4
	return r, true
}

// number parses a JSON number with the grammar's exact rules.
func (p *parser) number() (interface{}, error) {
	start := p.i
	if err := p.scanNumber(); err != nil {
		return nil, err
	}
	s := p.view(start, p.i)
	isInt := strings.IndexByte(s, '.') < 0
	if isInt {
		// Without a '.', an integer that fits int64 stays an integer (an
		// exponent makes ParseInt fail, so "1e3" is a float, as upstream).
		if n, ok := fastInt(s); ok {
			return n, nil
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, &SyntaxError{Offset: start, Msg: "number out of range"}
	}
	return f, nil
}

// scanNumber checks and skips a number.
func (p *parser) scanNumber() error {
	d := p.data
	if p.i < len(d) && d[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(d) && d[p.i] == '0':
		p.i++
	case p.i < len(d) && d[p.i] >= '1' && d[p.i] <= '9':
		for p.i < len(d) && d[p.i] >= '0' && d[p.i] <= '9' {
			p.i++
		}
	default:
		return p.errf("invalid number")
	}
	if p.i < len(d) && d[p.i] == '.' {
		p.i++
		if p.i >= len(d) || d[p.i] < '0' || d[p.i] > '9' {
			return p.errf("invalid number")
		}
		for p.i < len(d) && d[p.i] >= '0' && d[p.i] <= '9' {
			p.i++
		}
	}
	if p.i < len(d) && (d[p.i] == 'e' || d[p.i] == 'E') {
		p.i++
		if p.i < len(d) && (d[p.i] == '+' || d[p.i] == '-') {
			p.i++
		}
		if p.i >= len(d) || d[p.i] < '0' || d[p.i] > '9' {
			return p.errf("invalid number")
		}
		for p.i < len(d) && d[p.i] >= '0' && d[p.i] <= '9' {
			p.i++
		}
	}
	return nil
}

// fastInt parses short plain integers without strconv.
func fastInt(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// arrayNext consumes ',' or ']' and reports whether the array ended.
func (p *parser) arrayNext() (done bool, err error) {
	p.skipSpace()
	if p.i >= len(p.data) {
		return false, p.errf("unexpected end of input in array")
	}
	switch p.data[p.i] {
	case ',':
		p.i++
		return false, nil
	case ']':
		p.i++
		return true, nil
	}
	return false, p.errf("expected ',' or ']' in array")
}

// skipped marks a member that object leaves out.
var skipped any = &struct{ byte }{}

// items parses the array of a list's items at p.i: each object in it with
// a parser of its own, as a top-level object (string blocks of its own;
// its metadata and the values below it handled as an object's).
func (p *parser) items() ([]interface{}, error) {
	p.i++ // '['
	a := []interface{}{}
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		p.skipSpace()
		var v any
		if p.i < len(p.data) && p.data[p.i] == '{' {
			base := p.i
			raw, err := p.skipValue(2)
			if err != nil {
				return nil, err
			}
			sub := parser{data: raw, opts: p.opts, sizer: p.sizer}
			m, err := sub.object(0, "")
			if err != nil {
				if se, ok := err.(*SyntaxError); ok {
					se.Offset += base
				}
				return nil, err
			}
			p.arenas += sub.arenas
			p.arenaBytes += sub.arenaBytes
			p.hasItems = true
			sub.learn()
			v = m
		} else {
			var err error
			if v, err = p.value(2); err != nil {
				return nil, err
			}
		}
		a = append(a, v)
		if done, err := p.arrayNext(); err != nil || done {
			return a, err
		}
	}
}
