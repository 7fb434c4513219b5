package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/internal/intern"
	"github.com/loom-k8s/loom/internal/jsondec"
	"github.com/loom-k8s/loom/internal/protodec"
)

// A ListStream takes the items of a list response one at a time.
// [Request.Do] decodes a response into a v that implements it while the
// response arrives, so that a page of a big list (megabytes) is never held
// whole: only one item's bytes are, and each item is decoded as a watch
// event's object is. *client.List implements it.
type ListStream interface {
	// StreamMeta returns the list's type and list metadata, for Do to fill.
	StreamMeta() (*metav1.TypeMeta, *metav1.ListMeta)
	// NewItem returns an item to decode into: a pointer to a zero struct
	// (a typed object, *metav1.PartialObjectMetadata) or a new
	// *unstructured.Unstructured. The items of some lists come without
	// apiVersion and kind; an Unstructured item is taken without them.
	NewItem() any
	// AddItem appends an item that NewItem returned, decoded.
	AddItem(item any)
}

// stream is Do for a ListStream.
func (r *Request) stream(ctx context.Context, ls ListStream) error {
	ctx, leave, err := enterFence(ctx, r.method, r.URL().Path)
	if err != nil {
		return err
	}
	defer leave()
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	resp, err := r.send(ctx, r.accept(ls))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	f := &frames{src: resp.Body, max: DefaultMaxFrameSize}
	o := intern.OptionsFrom(ctx)
	switch mt := mediaType(resp.Header.Get("Content-Type")); mt {
	case MediaTypeProtobuf:
		err = streamProtoList(f, ls, o)
	case MediaTypeJSON, "":
		err = streamJSONList(f, ls, o)
	default:
		err = fmt.Errorf("unsupported response content type %q", mt)
	}
	if err != nil {
		return fmt.Errorf("rest: decoding response into %T: %w", ls, err)
	}
	return nil
}

// streamProtoList decodes a protobuf list: the envelope (a runtime.Unknown
// after the magic bytes), whose raw field is the list, whose field 1 is
// the ListMeta and field 2 repeats the items.
func streamProtoList(f *frames, ls ListStream, o intern.Options) error {
	if err := f.fill(1); errors.Is(err, io.EOF) && f.r == f.w {
		return errors.New("empty response body")
	}
	magic, err := f.take(len(protoMagic))
	if err != nil {
		return err
	}
	if !bytes.Equal(magic, protoMagic) {
		return errNoMagic
	}
	tm, lm := ls.StreamMeta()
	return protoStreamFields(f, -1, 4, func(num uint64, size uint64) error {
		switch num {
		case 1: // the type
			b, err := f.take(int(min(size, uint64(f.max)+1)))
			if err != nil {
				return err
			}
			return parseTypeMeta(b, &tm.APIVersion, &tm.Kind)
		case 2: // the list
			n := 0
			return protoStreamFields(f, f.offset+int64(size), 2, func(num uint64, size uint64) error {
				if num != 1 && num != 2 {
					return f.discard(size)
				}
				b, err := f.take(int(min(size, uint64(f.max)+1)))
				if err != nil {
					return err
				}
				if num == 1 {
					return lm.Unmarshal(b)
				}
				obj, io := cachedItem(o, b, protoMeta)
				if obj != nil {
					ls.AddItem(obj)
					n++
					return nil
				}
				item := ls.NewItem()
				if err := decodeProtoItem(b, item, io); err != nil {
					return fmt.Errorf("list item %d: %w", n, err)
				}
				ls.AddItem(item)
				n++
				return nil
			})
		case 3: // content encoding
			b, err := f.take(int(min(size, uint64(f.max)+1)))
			if err != nil {
				return err
			}
			if len(b) > 0 {
				return fmt.Errorf("unsupported protobuf content encoding %q", b)
			}
			return nil
		}
		return f.discard(size)
	})
}

// protoStreamFields reads protobuf fields from f up to the stream offset
// end (to the end of the stream when end < 0), calling fn for each
// length-delimited one, which must consume exactly size bytes. Fields 1 to
// known must be length-delimited; fields of other wire types beyond them
// are skipped.
func protoStreamFields(f *frames, end int64, known uint64, fn func(num, size uint64) error) error {
	for end < 0 || f.offset < end {
		key, err := f.uvarint()
		if err != nil {
			if end < 0 && errors.Is(err, io.EOF) {
				return nil
			}
			return f.eofErr(err, 1)
		}
		num, wt := key>>3, key&7
		if num == 0 {
			return errors.New("protobuf field number 0")
		}
		if num <= known && wt != 2 {
			return fmt.Errorf("protobuf field %d has wire type %d", num, wt)
		}
		switch wt {
		case 0:
			_, err = f.uvarint()
		case 1:
			err = f.discard(8)
		case 5:
			err = f.discard(4)
		case 2:
			var size uint64
			if size, err = f.uvarint(); err != nil {
				break
			}
			if end >= 0 && size > uint64(end-f.offset) {
				return errTruncated
			}
			start := f.offset
			if err = fn(num, size); err == nil && uint64(f.offset-start) != size {
				err = fmt.Errorf("protobuf field %d: %d bytes decoded of %d", num, f.offset-start, size)
			}
		default:
			return fmt.Errorf("unsupported protobuf wire type %d", wt)
		}
		if err != nil {
			return f.eofErr(err, 1)
		}
	}
	if f.offset != end {
		return errTruncated
	}
	return nil
}

// cachedItem returns the object that o.Cached has for a list item, read
// from the item's encoding b by meta, or nil. When that object has the
// item's resourceVersion, it stands for the item (same); otherwise it is
// returned as o.Prior, to be decoded with.
func cachedItem(o intern.Options, b []byte, meta func([]byte) (namespace, name, resourceVersion string, ok bool)) (same any, _ intern.Options) {
	lookup := cacheLookup(o)
	if lookup == nil {
		return nil, o
	}
	ns, name, rv, ok := meta(b)
	if !ok {
		return nil, o
	}
	held := lookup(ns, name, rv)
	if held == nil {
		return nil, o
	}
	if v, ok := held.(interface{ GetResourceVersion() string }); ok && v.GetResourceVersion() != rv {
		o.Prior = held
		return nil, o
	}
	return held, o
}

// cacheLookup returns o.Cached's lookup, or nil when nothing can be
// looked up now.
func cacheLookup(o intern.Options) func(namespace, name, resourceVersion string) any {
	if o.Cached == nil {
		return nil
	}
	return o.Cached()
}

// protoMeta returns the namespace, name and resourceVersion of a
// protobuf-encoded object (field 1 of every object is its ObjectMeta,
// whose fields 1, 3 and 6 they are), as views of b. ok is false when the
// object is malformed or lacks a name or resourceVersion.
func protoMeta(b []byte) (namespace, name, resourceVersion string, ok bool) {
	var meta []byte
	if protoFields(b, func(num uint64, data []byte) error {
		if num == 1 {
			meta = data
		}
		return nil
	}) != nil || meta == nil {
		return "", "", "", false
	}
	err := protoFields(meta, func(num uint64, data []byte) error {
		if len(data) == 0 {
			return nil
		}
		switch num {
		case 1:
			name = unsafe.String(&data[0], len(data))
		case 3:
			namespace = unsafe.String(&data[0], len(data))
		case 6:
			resourceVersion = unsafe.String(&data[0], len(data))
		}
		return nil
	})
	return namespace, name, resourceVersion, err == nil && name != "" && resourceVersion != ""
}

// decodeProtoItem decodes one protobuf list item into item.
func decodeProtoItem(b []byte, item any, o intern.Options) error {
	if protodec.SupportedPointer(item) {
		return protodec.UnmarshalWith(b, item, o)
	}
	pm, ok := item.(protoUnmarshaler)
	if !ok {
		return fmt.Errorf("%T has no protobuf form", item)
	}
	return pm.Unmarshal(b)
}

// streamJSONList decodes a JSON list: an object whose "items" array is
// decoded an item at a time. Its "apiVersion", "kind" and "metadata"
// fill the list; other keys are skipped.
func streamJSONList(f *frames, ls ListStream, o intern.Options) error {
	if _, err := f.peek(); errors.Is(err, io.EOF) {
		return errors.New("empty response body")
	}
	if err := f.expect('{', "'{' at the start of a list"); err != nil {
		return err
	}
	tm, lm := ls.StreamMeta()
	items := false
	for first := true; ; first = false {
		c, err := f.peek()
		if err != nil {
			return f.eofErr(err, 1)
		}
		if first && c == '}' {
			f.frame(f.r + 1)
			break
		}
		k, err := f.jsonValue()
		if err != nil {
			return err
		}
		var key string
		if err := json.Unmarshal(k, &key); err != nil {
			return &DecodeError{Offset: f.offset, Err: fmt.Errorf("list object key: %w", err)}
		}
		if err := f.expect(':', "':' after an object key"); err != nil {
			return err
		}
		if key == "items" {
			if items {
				return errors.New(`the list has two "items"`)
			}
			items = true
			if err := streamJSONItems(f, ls, o); err != nil {
				return err
			}
		} else {
			v, err := f.jsonValue()
			if err != nil {
				return err
			}
			switch key {
			case "apiVersion":
				err = json.Unmarshal(v, &tm.APIVersion)
			case "kind":
				err = json.Unmarshal(v, &tm.Kind)
			case "metadata":
				err = jsondec.Decode(v, lm)
			default:
				if !json.Valid(v) {
					err = errors.New("invalid JSON")
				}
			}
			if err != nil {
				return fmt.Errorf("list %s: %w", key, err)
			}
		}
		c, err = f.peek()
		if err != nil {
			return f.eofErr(err, 1)
		}
		f.frame(f.r + 1)
		if c == '}' {
			break
		}
		if c != ',' {
			return &DecodeError{Offset: f.offset - 1, Err: fmt.Errorf("expected ',' or '}' after a list field, got %q", c)}
		}
	}
	if c, err := f.peek(); err == nil {
		return &DecodeError{Offset: f.offset, Err: fmt.Errorf("%q after the list", c)}
	} else if !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// streamJSONItems decodes the array of a JSON list's "items", item by item.
func streamJSONItems(f *frames, ls ListStream, o intern.Options) error {
	c, err := f.peek()
	if err != nil {
		return f.eofErr(err, 1)
	}
	if c == 'n' {
		v, err := f.jsonValue()
		if err != nil {
			return err
		}
		if string(v) != "null" {
			return &DecodeError{Offset: f.offset, Err: errors.New("list items: invalid value")}
		}
		return nil
	}
	if err := f.expect('[', "'[' for the list's items"); err != nil {
		return err
	}
	if c, err := f.peek(); err == nil && c == ']' {
		f.frame(f.r + 1)
		return nil
	}
	for n := 0; ; n++ {
		v, err := f.jsonValue()
		if err != nil {
			return err
		}
		if len(v) == 0 || v[0] != '{' {
			return fmt.Errorf("list item %d is not an object", n)
		}
		if obj, io := cachedItem(o, v, jsondec.Meta); obj != nil {
			ls.AddItem(obj)
		} else {
			item := ls.NewItem()
			if u, ok := item.(*unstructured.Unstructured); ok {
				u.Object, err = jsondec.ObjectWith(v, io)
			} else {
				err = decodeJSON(v, item, io)
			}
			if err != nil {
				return fmt.Errorf("list item %d: %w", n, err)
			}
			ls.AddItem(item)
		}
		c, err := f.peek()
		if err != nil {
			return f.eofErr(err, 1)
		}
		f.frame(f.r + 1)
		if c == ']' {
			return nil
		}
		if c != ',' {
			return &DecodeError{Offset: f.offset - 1, Err: fmt.Errorf("expected ',' or ']' after a list item, got %q", c)}
		}
	}
}
