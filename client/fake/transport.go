package fake

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// Transport returns an http.RoundTripper that hands each request to the
// Server's handler in the calling process: no socket, no TLS, nothing
// that a testing/synctest bubble cannot see. Responses stream through a
// pipe, so watches deliver their events as they happen. Closing a
// response's body ends its request.
func (s *Server) Transport() http.RoundTripper { return roundTripper{h: s} }

type roundTripper struct{ h http.Handler }

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	inner := req.Clone(ctx)
	if req.Body == nil {
		inner.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	rw := &responseWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			rw.WriteHeader(http.StatusOK) // if the handler wrote nothing
			pw.Close()
			if req.Body != nil {
				req.Body.Close()
			}
		}()
		t.h.ServeHTTP(rw, inner)
	}()
	select {
	case <-rw.ready:
	case <-req.Context().Done():
		cancel()
		pr.Close()
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status:     http.StatusText(rw.code),
		StatusCode: rw.code,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        rw.sent,
		Body:          &responseBody{pr: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// responseWriter passes a handler's response to RoundTrip: the status and
// header once, then the body through a pipe.
type responseWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	code   int
	sent   http.Header
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush does nothing: every Write reaches the reader at once.
func (w *responseWriter) Flush() { w.WriteHeader(http.StatusOK) }

type responseBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *responseBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *responseBody) Close() error {
	b.cancel()
	return b.pr.Close()
}
