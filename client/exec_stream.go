package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/moby/spdystream"
)

// The channels of v4.channel.k8s.io and v5.channel.k8s.io: each binary
// message starts with the number of the stream it carries. v5 adds
// channelClose, whose message [channelClose, N] says stream N ended.
const (
	channelStdin  byte = 0
	channelStdout byte = 1
	channelStderr byte = 2
	channelError  byte = 3
	channelResize byte = 4
	channelClose  byte = 255
)

// copyBuffer is the size of the reads of standard input.
const copyBuffer = 32 << 10

// wsWriter serializes the writes to a WebSocket, which takes one writer
// at a time.
type wsWriter struct {
	mu sync.Mutex
	ws *websocket.Conn
}

func (w *wsWriter) send(channel byte, data []byte) error {
	msg := make([]byte, 1+len(data))
	msg[0] = channel
	copy(msg[1:], data)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ws.WriteMessage(websocket.BinaryMessage, msg)
}

// streamWebSocket copies the streams of an exec or attach over the
// channels of ws until the server closes it.
func (t *streamTarget) streamWebSocket(ctx context.Context, ws *websocket.Conn, o streamOptions) error {
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	w := &wsWriter{ws: ws}
	done := make(chan struct{})
	defer close(done)
	go keepAlive(done, func() error {
		return ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(pingPeriod))
	})
	if o.stdin != nil {
		closeSignal := ws.Subprotocol() == protocolV5
		go func() {
			buf := make([]byte, copyBuffer)
			for {
				n, err := o.stdin.Read(buf)
				if n > 0 {
					if w.send(channelStdin, buf[:n]) != nil {
						return
					}
				}
				if err != nil {
					if closeSignal {
						_ = w.send(channelClose, []byte{channelStdin})
					}
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	if o.tty && o.resize != nil {
		go sendResizes(done, o.resize, func(s TerminalSize) error { return w.send(channelResize, resizeJSON(s)) })
	}
	var status []byte
	gotStatus := false
	for {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if gotStatus {
				return statusError(status)
			}
			// v4 and v5 always end with a Status, Success included.
			return fmt.Errorf("client: %s pod %s/%s: the connection closed before the server said how the command ended: %w", t.op, t.namespace, t.pod, err)
		}
		if typ != websocket.BinaryMessage || len(data) == 0 {
			continue
		}
		var out io.Writer
		switch data[0] {
		case channelStdout:
			out = o.stdout
		case channelStderr:
			out = o.stderr
		case channelError:
			status = append(status, data[1:]...)
			gotStatus = true
			continue
		default:
			continue
		}
		if out != nil && len(data) > 1 {
			if _, err := out.Write(data[1:]); err != nil {
				return fmt.Errorf("client: %s pod %s/%s: writing the output: %w", t.op, t.namespace, t.pod, err)
			}
		}
	}
}

func sendResizes(done <-chan struct{}, sizes <-chan TerminalSize, send func(TerminalSize) error) {
	for {
		select {
		case <-done:
			return
		case s, ok := <-sizes:
			if !ok || send(s) != nil {
				return
			}
		}
	}
}

// spdySession is a client SPDY connection and the streams made on it
// that are not over yet, which closing it resets (SPDY would otherwise
// wait for each to end before closing the connection).
type spdySession struct {
	conn *spdystream.Connection
	raw  net.Conn

	mu      sync.Mutex
	streams map[*spdystream.Stream]struct{}
	closed  bool
}

func (s *spdySession) create(headers http.Header) (*spdystream.Stream, error) {
	st, err := createStream(s.conn, headers)
	if st != nil {
		s.mu.Lock()
		if s.streams == nil {
			s.streams = map[*spdystream.Stream]struct{}{}
		}
		s.streams[st] = struct{}{}
		s.mu.Unlock()
	}
	return st, err
}

// reset ends streams that are over.
func (s *spdySession) reset(streams ...*spdystream.Stream) {
	s.mu.Lock()
	for _, st := range streams {
		delete(s.streams, st)
	}
	s.mu.Unlock()
	for _, st := range streams {
		_ = st.Reset()
	}
}

func (s *spdySession) Close() error {
	s.mu.Lock()
	streams := s.streams
	s.streams = nil
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if closed {
		return nil
	}
	for st := range streams {
		_ = st.Reset()
	}
	_ = s.conn.Close()
	return s.raw.Close()
}

func streamHeaders(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// streamSPDY copies the streams of an exec or attach over SPDY streams,
// one per kind, until the server ends them.
func (t *streamTarget) streamSPDY(ctx context.Context, sess *spdySession, o streamOptions) error {
	defer sess.Close()
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	fail := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("client: %s pod %s/%s: %w", t.op, t.namespace, t.pod, err)
	}
	errStream, err := sess.create(streamHeaders("streamType", "error"))
	if err != nil {
		return fail(err)
	}
	var stdin, resize *spdystream.Stream
	if o.stdin != nil {
		if stdin, err = sess.create(streamHeaders("streamType", "stdin")); err != nil {
			return fail(err)
		}
	}
	var copies sync.WaitGroup
	var outErr error
	var outOnce sync.Once
	for _, out := range []struct {
		kind string
		w    io.Writer
	}{{"stdout", o.stdout}, {"stderr", o.stderr}} {
		if out.w == nil {
			continue
		}
		s, err := sess.create(streamHeaders("streamType", out.kind))
		if err != nil {
			return fail(err)
		}
		copies.Add(1)
		go func() {
			defer copies.Done()
			if _, err := io.Copy(out.w, s); err != nil {
				outOnce.Do(func() { outErr = err })
				sess.Close()
			}
		}()
	}
	if o.tty && o.resize != nil {
		if resize, err = sess.create(streamHeaders("streamType", "resize")); err != nil {
			return fail(err)
		}
	}
	done := make(chan struct{})
	defer close(done)
	if stdin != nil {
		go func() {
			_, _ = io.Copy(stdin, o.stdin)
			_ = stdin.Close()
		}()
	}
	if resize != nil {
		go sendResizes(done, o.resize, func(s TerminalSize) error {
			_, err := resize.Write(append(resizeJSON(s), '\n'))
			return err
		})
	}
	status, err := io.ReadAll(errStream)
	copies.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fail(err)
	}
	if outErr != nil {
		return fail(fmt.Errorf("writing the output: %w", outErr))
	}
	if len(status) == 0 {
		// v4 and v5 always end with a Status, Success included.
		return fail(errors.New("the connection closed before the server said how the command ended"))
	}
	return statusError(status)
}
