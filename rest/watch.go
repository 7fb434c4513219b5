package rest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/loom-k8s/loom/internal/intern"
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

	buf    []byte // frame buffer, reused
	r, w   int    // unread data is buf[r:w]
	offset int64  // stream offset of buf[r]
	max    int
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
	w := &Watcher[PT]{body: body, max: DefaultMaxFrameSize, newObj: func() PT { return PT(new(T)) }}
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
		frame, err := w.jsonFrame()
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
		o := w.newObj()
		if err := w.decodeObject(obj, any(o)); err != nil {
			return Event[PT]{}, &DecodeError{Offset: start, Err: fmt.Errorf("%s event: %w", typ, err)}
		}
		ev.Object = o
	case watch.Error:
		st := &metav1.Status{}
		if err := w.decodeObject(obj, st); err != nil {
			return Event[PT]{}, &DecodeError{Offset: start, Err: fmt.Errorf("ERROR event: %w", err)}
		}
		ev.Status = st
	default:
		return Event[PT]{}, &DecodeError{Offset: start, Err: fmt.Errorf("unknown event type %q", typ)}
	}
	return ev, nil
}

func (w *Watcher[PT]) decodeObject(obj []byte, v any) error {
	if len(obj) == 0 {
		return errors.New("no object")
	}
	if w.proto {
		env, err := parseUnknown(obj)
		if err != nil {
			return err
		}
		return decodeProtoObject(env, v, intern.OptionsFrom(w.ctx))
	}
	return decodeJSON(obj, v, intern.OptionsFrom(w.ctx))
}

// fill reads more data into the buffer, growing it so that at least need
// unread bytes fit. It returns io.EOF only when no data was read.
func (w *Watcher[PT]) fill(need int) error {
	if w.r > 0 && (w.r == w.w || len(w.buf)-w.r < need) {
		n := copy(w.buf, w.buf[w.r:w.w])
		w.r, w.w = 0, n
	}
	if need > len(w.buf) {
		size := max(2*len(w.buf), need, 32<<10)
		nb := make([]byte, size)
		copy(nb, w.buf[w.r:w.w])
		w.w -= w.r
		w.r = 0
		w.buf = nb
	}
	if w.w == len(w.buf) {
		return nil
	}
	n, err := w.body.Read(w.buf[w.w:])
	w.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		return nil
	}
	return err
}

func (w *Watcher[PT]) protoFrame() ([]byte, error) {
	for w.w-w.r < 4 {
		if err := w.fill(4); err != nil {
			return nil, w.eofErr(err, w.w-w.r)
		}
	}
	n := int(binary.BigEndian.Uint32(w.buf[w.r:]))
	if n > w.max || n < 0 {
		return nil, &DecodeError{Offset: w.offset, Err: fmt.Errorf("frame of %d bytes exceeds the limit of %d", n, w.max)}
	}
	for w.w-w.r < 4+n {
		if err := w.fill(4 + n); err != nil {
			return nil, w.eofErr(err, 1)
		}
	}
	frame := w.buf[w.r+4 : w.r+4+n]
	w.r += 4 + n
	w.offset += int64(4 + n)
	return frame, nil
}

// eofErr turns EOF in the middle of a frame into a DecodeError.
func (w *Watcher[PT]) eofErr(err error, partial int) error {
	if errors.Is(err, io.EOF) && partial > 0 {
		return &DecodeError{Offset: w.offset, Err: io.ErrUnexpectedEOF}
	}
	return err
}

// jsonFrame returns the next top-level JSON object in the stream. It tracks
// nesting and strings only; the JSON decoder validates the content.
func (w *Watcher[PT]) jsonFrame() ([]byte, error) {
	// Skip whitespace between objects.
	for {
		for w.r < w.w && isSpace(w.buf[w.r]) {
			w.r++
			w.offset++
		}
		if w.r < w.w {
			break
		}
		if err := w.fill(1); err != nil {
			return nil, err
		}
	}
	if w.buf[w.r] != '{' {
		return nil, &DecodeError{Offset: w.offset, Err: fmt.Errorf("expected '{' at the start of a JSON frame, got %q", w.buf[w.r])}
	}
	var (
		depth    int
		inString bool
		escape   bool
		i        = w.r // scan position
	)
	for {
		for ; i < w.w; i++ {
			c := w.buf[i]
			if inString {
				switch {
				case escape:
					escape = false
				case c == '\\':
					escape = true
				case c == '"':
					inString = false
				}
				continue
			}
			switch c {
			case '"':
				inString = true
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					frame := w.buf[w.r : i+1]
					w.offset += int64(i + 1 - w.r)
					w.r = i + 1
					return frame, nil
				}
			}
		}
		scanned := i - w.r
		if scanned >= w.max {
			return nil, &DecodeError{Offset: w.offset, Err: fmt.Errorf("JSON frame exceeds the limit of %d bytes", w.max)}
		}
		oldR := w.r
		if err := w.fill(scanned + 1); err != nil {
			return nil, w.eofErr(err, 1)
		}
		i = i - oldR + w.r // the buffer may have moved
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

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
