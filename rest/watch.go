package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/loom-k8s/loom/internal/intern"
	"github.com/loom-k8s/loom/internal/jsondec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Event is one watch event, decoded into the caller's type.
//
// Type is one of watch.Added, watch.Modified, watch.Deleted, watch.Bookmark
// and watch.Error. For Error events Object is the zero value and Status
// holds the server's status (for example 410 Expired when the requested
// resourceVersion was compacted); use [Event.Err] to get it as an error.
// For the other types Status is nil. A Bookmark's object carries only its
// resourceVersion (and annotations).
type Event[T any] struct {
	// Type is the event type.
	Type watch.EventType
	// Object is the decoded object; the zero value for Error events.
	Object T
	// Status is the server's status for Error events; nil otherwise.
	Status *metav1.Status
}

// Err returns a [*StatusError] for an Error event, nil otherwise.
func (e Event[T]) Err() error {
	if e.Type != watch.Error || e.Status == nil {
		return nil
	}
	return &StatusError{ErrStatus: *e.Status, Method: "WATCH", Code: int(e.Status.Code)}
}

// DefaultMaxFrameSize is the largest watch frame a [Watcher] accepts unless
// told otherwise (etcd's object limit is 1.5 MiB by default).
const DefaultMaxFrameSize = 16 << 20

// Watcher decodes a watch stream into typed events. Get one from [Watch]
// (against a server) or [NewWatcher] (over any byte stream).
//
// Next must be called from one goroutine at a time. Stop may be called from
// any goroutine, any number of times. Decoded objects are fresh
// allocations that never alias the Watcher's buffers; the caller owns them.
type Watcher[PT any] struct {
	body    io.ReadCloser
	cancel  context.CancelFunc
	ctx     context.Context
	proto   bool
	newObj  func() PT
	stopped atomic.Bool
	once    sync.Once

	frames       // the stream, read in frames
	err    error // sticky
}

// NewWatcher returns a Watcher that decodes body, a watch stream of the
// given Content-Type: "application/json" (a stream of JSON objects) or
// "application/vnd.kubernetes.protobuf;stream=watch" (4-byte big-endian
// length-prefixed metav1.WatchEvent messages). Objects are decoded into
// new(T). Stop closes body.
//
// NewWatcher is the decoding half of [Watch]; use it to replay recorded
// streams.
func NewWatcher[T any, PT interface{ *T }](body io.ReadCloser, contentType string) (*Watcher[PT], error) {
	w := &Watcher[PT]{body: body, frames: frames{src: body, max: DefaultMaxFrameSize}, newObj: func() PT { return PT(new(T)) }}
	switch mt := mediaType(contentType); mt {
	case MediaTypeJSON:
	case MediaTypeProtobuf:
		if !hasProtobuf(any(PT(new(T)))) {
			return nil, fmt.Errorf("rest: watch stream is protobuf but %T has no protobuf form", PT(nil))
		}
		w.proto = true
	default:
		return nil, fmt.Errorf("rest: unsupported watch content type %q", contentType)
	}
	return w, nil
}

// Stop ends the watch: it closes the stream, and a blocked or later Next
// returns io.EOF. It is safe to call concurrently with Next and more than
// once.
func (w *Watcher[PT]) Stop() {
	w.once.Do(func() {
		w.stopped.Store(true)
		if w.cancel != nil {
			w.cancel()
		}
		w.body.Close()
	})
}

// Next blocks until the next event and returns it.
//
// At the end of the stream it returns io.EOF: when the server closed the
// stream cleanly (for example after timeoutSeconds) or Stop was called.
// When the watch's context is cancelled it returns the context's error. A
// truncated or undecodable frame returns a [*DecodeError]. After any error
// the watch is over: the stream is closed, and every later call returns
// the same error.
func (w *Watcher[PT]) Next() (Event[PT], error) {
	if w.err != nil {
		return Event[PT]{}, w.err
	}
	if w.stopped.Load() {
		// Stop wins over events still in the buffer.
		w.err = io.EOF
		return Event[PT]{}, w.err
	}
	ev, err := w.next()
	if err != nil {
		w.err = w.classify(err)
		w.Stop()
		return Event[PT]{}, w.err
	}
	return ev, nil
}

func (w *Watcher[PT]) classify(err error) error {
	if w.ctx != nil && w.ctx.Err() != nil && !w.stopped.Load() {
		return w.ctx.Err()
	}
	if w.stopped.Load() {
		return io.EOF
	}
	var de *DecodeError
	if errors.Is(err, io.EOF) || errors.As(err, &de) {
		return err
	}
	return fmt.Errorf("rest: reading watch stream: %w", err)
}

func (w *Watcher[PT]) next() (Event[PT], error) {
	var (
		ev    Event[PT]
		typ   string
		obj   []byte
		start = w.offset
	)
	if w.proto {
		frame, err := w.protoFrame()
		if err != nil {
			return ev, err
		}
		if typ, obj, err = parseWatchEvent(frame); err != nil {
			return ev, &DecodeError{Offset: start, Err: err}
		}
	} else {
		frame, err := w.jsonObject()
		if err != nil {
			return ev, err
		}
		if typ, obj, err = splitJSONEvent(frame); err != nil {
			return ev, &DecodeError{Offset: start, Err: err}
		}
	}
	ev.Type = watch.EventType(typ)
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		var prior any
		switch ev.Type {
		case watch.Added:
			var o PT
			var ok bool
			if o, ok, prior = w.cached(obj); ok {
				ev.Object = o
				return ev, nil
			}
		case watch.Modified:
			// Decoded in any case, with what is held as its previous
			// version.
			if o, ok, p := w.cached(obj); ok {
				prior = o
			} else {
				prior = p
			}
		}
		o := w.newObj()
		if err := w.decodeObject(obj, any(o), prior); err != nil {
			return Event[PT]{}, &DecodeError{Offset: start, Err: fmt.Errorf("%s event: %w", typ, err)}
		}
		ev.Object = o
	case watch.Error:
		st := &metav1.Status{}
		if err := w.decodeObject(obj, st, nil); err != nil {
			return Event[PT]{}, &DecodeError{Offset: start, Err: fmt.Errorf("ERROR event: %w", err)}
		}
		ev.Status = st
	default:
		return Event[PT]{}, &DecodeError{Offset: start, Err: fmt.Errorf("unknown event type %q", typ)}
	}
	return ev, nil
}

// cached returns the object that the decoder options of the watch's
// context already hold for an event's object at its resourceVersion (see
// intern.Options.Cached: an informer's, during a streaming list), which
// then need not be decoded; or else the object's previous version that
// they hold, to be decoded with (intern.Options.Prior).
func (w *Watcher[PT]) cached(obj []byte) (same PT, ok bool, prior any) {
	o := intern.OptionsFrom(w.ctx)
	if cacheLookup(o) == nil {
		return same, false, nil // the common case, outside a list: no parsing
	}
	var got any
	if w.proto {
		env, err := parseUnknown(obj)
		if err != nil || env.contentEncoding != "" {
			return same, false, nil
		}
		got, o = cachedItem(o, env.raw, protoMeta)
	} else {
		got, o = cachedItem(o, obj, jsondec.Meta)
	}
	same, ok = got.(PT)
	return same, ok, o.Prior
}

// decodeObject decodes obj into v, with prior (if not nil) as the
// object's previous version (intern.Options.Prior).
func (w *Watcher[PT]) decodeObject(obj []byte, v, prior any) error {
	if len(obj) == 0 {
		return errors.New("no object")
	}
	o := intern.OptionsFrom(w.ctx)
	o.Prior = prior
	if w.proto {
		env, err := parseUnknown(obj)
		if err != nil {
			return err
		}
		return decodeProtoObject(env, v, o)
	}
	return decodeJSON(obj, v, o)
}

var (
	jsonTypePrefix = []byte(`{"type":"`)
	jsonObjectKey  = []byte(`","object":`)
)

// splitJSONEvent returns the type and the object bytes of a JSON watch
// event. The API server writes {"type":"X","object":{...}}; that layout is
// taken apart without decoding, and any other layout goes through
// encoding/json.
func splitJSONEvent(frame []byte) (string, []byte, error) {
	if bytes.HasPrefix(frame, jsonTypePrefix) {
		rest := frame[len(jsonTypePrefix):]
		if q := bytes.IndexByte(rest, '"'); q > 0 && q < 16 && bytes.HasPrefix(rest[q:], jsonObjectKey) {
			obj := bytes.TrimRight(rest[q+len(jsonObjectKey):], " \t\r\n")
			if len(obj) > 1 && obj[len(obj)-1] == '}' {
				return internString(rest[:q]), bytes.TrimSpace(obj[:len(obj)-1]), nil
			}
		}
	}
	var ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(frame, &ev); err != nil {
		return "", nil, err
	}
	return ev.Type, ev.Object, nil
}
