package rest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/intern"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/conversion/queryparams"
)

// Request is a request being built. Start one from a [Client] (Get, Post,
// Put, Patch, Delete or Verb), chain the builder methods, and finish with
// [Request.Do], [Request.DoRaw], [Request.Stream] or [Watch].
//
// The path is /api/v1 for the core group (the default) or
// /apis/<group>/<version>, then /namespaces/<ns>, /<resource>, /<name> and
// /<subresource>, each part only when set. AbsPath replaces all of it.
//
// Builder errors (a bad option struct, say) are remembered and returned by
// the terminal method. A Request is not safe for concurrent use; it may be
// sent more than once.
type Request struct {
	c       *Client
	method  string
	group   string
	version string
	ns      string
	res     string
	name    string
	sub     string
	abs     string
	params  url.Values
	header  http.Header
	timeout time.Duration

	body     []byte
	bodyObj  any
	bodyType string
	err      error
}

// Group sets the API group; "" (the default) is the core group.
func (r *Request) Group(g string) *Request { r.group = g; return r }

// Version sets the API version. Default "v1".
func (r *Request) Version(v string) *Request { r.version = v; return r }

// Namespace sets the namespace. An empty namespace means all namespaces
// (for lists and watches) or a cluster-scoped resource.
func (r *Request) Namespace(ns string) *Request { r.ns = ns; return r }

// Resource sets the resource (plural, lower-case: "pods").
func (r *Request) Resource(res string) *Request { r.res = res; return r }

// Name sets the object name.
func (r *Request) Name(name string) *Request {
	if name == "" && r.err == nil {
		r.err = errors.New("rest: empty object name")
	}
	r.name = name
	return r
}

// SubResource sets the subresource, for example "status", "scale" or "log".
func (r *Request) SubResource(sub ...string) *Request { r.sub = path.Join(sub...); return r }

// AbsPath sets the whole path (joined and relative to the server's base
// path), ignoring group, version, namespace, resource, name and
// subresource. For /version, /healthz, discovery and the like.
func (r *Request) AbsPath(parts ...string) *Request {
	r.abs = path.Join(append([]string{"/"}, parts...)...)
	return r
}

// Param adds a query parameter.
func (r *Request) Param(key, value string) *Request {
	if r.params == nil {
		r.params = url.Values{}
	}
	r.params.Add(key, value)
	return r
}

// Options adds the query parameters of an options struct, using its json
// tags as parameter names: *metav1.ListOptions, GetOptions, CreateOptions,
// UpdateOptions, PatchOptions, *corev1.PodLogOptions and the like. Zero
// fields (omitempty) are left out.
func (r *Request) Options(opts any) *Request {
	if opts == nil {
		return r
	}
	v, err := queryparams.Convert(opts)
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("rest: encoding %T as query parameters: %w", opts, err)
		}
		return r
	}
	for k, vs := range v {
		for _, x := range vs {
			r.Param(k, x)
		}
	}
	return r
}

// Header adds a request header.
func (r *Request) Header(key, value string) *Request {
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Add(key, value)
	return r
}

// Timeout bounds this request (not Stream or Watch). It overrides
// Config.Timeout; zero means no timeout beyond the context.
func (r *Request) Timeout(d time.Duration) *Request { r.timeout = d; return r }

// Body sets the request body: a []byte is sent as is (JSON unless the
// request was made by Patch with another type); anything else is encoded
// as protobuf when the client asks for protobuf and obj is a built-in type
// with its apiVersion and kind set, and as JSON otherwise.
func (r *Request) Body(obj any) *Request {
	switch b := obj.(type) {
	case []byte:
		r.body = b
		if r.bodyType == "" {
			r.bodyType = MediaTypeJSON
		}
	default:
		r.bodyObj = obj
	}
	return r
}

// URL returns the URL the request will be sent to.
func (r *Request) URL() *url.URL {
	u := *r.c.base
	p := r.abs
	if p == "" {
		version := r.version
		if version == "" {
			version = "v1"
		}
		if r.group == "" {
			p = "/api/" + version
		} else {
			p = "/apis/" + r.group + "/" + version
		}
		if r.ns != "" {
			p += "/namespaces/" + r.ns
		}
		if r.res != "" {
			p += "/" + r.res
		}
		if r.name != "" {
			p += "/" + r.name
		}
		if r.sub != "" {
			p += "/" + r.sub
		}
	}
	u.Path = u.Path + p
	if r.params != nil {
		u.RawQuery = r.params.Encode()
	}
	return &u
}

// accept returns the Accept header for decoding into v.
func (r *Request) accept(v any) string {
	if r.c.contentType == Protobuf && (v == nil || hasProtobuf(v)) {
		return acceptProtobuf
	}
	return MediaTypeJSON
}

// Result is a response read whole, returned by [Request.DoRaw].
type Result struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// ContentType is the response's Content-Type.
	ContentType string
	// Body is the response body.
	Body []byte
	// Warnings holds the server's Warning headers.
	Warnings []string
}

// Into decodes the body into v according to its content type.
func (res *Result) Into(v any) error { return res.into(v, intern.Options{}) }

// into is Into with the decoder options an informer's context carries.
func (res *Result) into(v any, o intern.Options) error {
	if err := decodeInto(mediaType(res.ContentType), res.Body, v, o); err != nil {
		return fmt.Errorf("rest: decoding response into %T: %w", v, err)
	}
	return nil
}

// Do sends the request and decodes a 2xx response into v (which may be nil
// to discard it). v should be a pointer to a zero value: a typed object
// (*corev1.Pod), *unstructured.Unstructured, *metav1.PartialObjectMetadata,
// a list type, or any JSON-decodable type. A non-2xx response returns a
// [*StatusError]; a certificate problem a [*TLSVerificationError]. A v
// that is a [ListStream] is decoded item by item as the response arrives.
func (r *Request) Do(ctx context.Context, v any) error {
	if ls, ok := v.(ListStream); ok {
		return r.stream(ctx, ls)
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	res, err := r.do(ctx, r.accept(v), buf)
	if err != nil {
		return err
	}
	if v == nil || len(res.Body) == 0 && res.StatusCode == http.StatusNoContent {
		return nil
	}
	err = res.into(v, intern.OptionsFrom(ctx))
	if buf.Cap() <= maxPooledBody {
		// The decoders copy what they keep (Loom's own, tested; and
		// encoding/json, whose Unmarshalers must copy by contract), so
		// the buffer can read the next response: a paginated list then
		// reads every page into one buffer, not a new one per page.
		bodyPool.Put(buf)
	}
	return err
}

// bodyPool holds buffers that Do reads responses into.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest buffer kept for reuse.
const maxPooledBody = 16 << 20

// DoRaw sends the request and returns the whole response as the server
// sent it: protobuf if the client asks for protobuf and the server can
// encode the resource that way, JSON otherwise ([Result.Into] decodes
// either). A non-2xx response returns a [*StatusError] (and no Result).
func (r *Request) DoRaw(ctx context.Context) (*Result, error) {
	return r.do(ctx, r.accept(nil), nil)
}

// do sends the request and reads the whole response, into buf when it is
// not nil (reset first; the Result's Body then aliases it).
func (r *Request) do(ctx context.Context, accept string, buf *bytes.Buffer) (*Result, error) {
	ctx, leave, err := enterFence(ctx, r.method, r.URL().Path)
	if err != nil {
		return nil, err
	}
	defer leave()
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	resp, err := r.send(ctx, accept)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body []byte
	if buf != nil {
		buf.Reset()
		if n := resp.ContentLength; n > 0 && n <= maxPooledBody {
			buf.Grow(int(n) + bytes.MinRead)
		}
		_, err = buf.ReadFrom(resp.Body)
		body = buf.Bytes()
	} else {
		body, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		return nil, fmt.Errorf("rest: %s %s: reading response: %w", r.method, resp.Request.URL.Path, err)
	}
	return &Result{StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: body, Warnings: resp.Header.Values("Warning")}, nil
}

// Stream sends the request and returns the response body for the caller
// to read and close, for example a pod's log with follow=true. A non-2xx
// response returns a [*StatusError].
func (r *Request) Stream(ctx context.Context) (io.ReadCloser, error) {
	r.timeout = 0
	resp, err := r.send(ctx, "*/*")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Watch sends r as a watch (it sets watch=true) and returns a [Watcher]
// that decodes events into new(T). If the client asks for protobuf and
// *T has a protobuf form the stream is protobuf; otherwise JSON.
//
// The watch runs until the server ends it, ctx is cancelled, or Stop is
// called. A non-2xx response returns a [*StatusError]; a watch from a
// resourceVersion that is too old instead succeeds and delivers an Error
// event with a 410 Expired status (see [Event.Err]).
func Watch[T any, PT interface{ *T }](ctx context.Context, r *Request) (*Watcher[PT], error) {
	if r.params == nil || r.params.Get("watch") == "" {
		r.Param("watch", "true")
	}
	r.timeout = 0
	ctx, cancel := context.WithCancel(ctx)
	resp, err := r.send(ctx, r.accept(any(PT(new(T)))))
	if err != nil {
		cancel()
		return nil, err
	}
	w, err := NewWatcher[T, PT](resp.Body, resp.Header.Get("Content-Type"))
	if err != nil {
		cancel()
		resp.Body.Close()
		return nil, err
	}
	w.ctx, w.cancel = ctx, cancel
	return w, nil
}

// send performs the attempts: rate limit, request, observation, logging
// and retries. It returns a 2xx response with an open body, or an error.
func (r *Request) send(ctx context.Context, accept string) (*http.Response, error) {
	if r.err != nil {
		return nil, r.err
	}
	c := r.c
	body, ctype := r.body, r.bodyType
	if r.bodyObj != nil {
		b, ct, err := encodeBody(c.contentType, r.bodyObj)
		if err != nil {
			return nil, fmt.Errorf("rest: %w", err)
		}
		body = b
		if ctype == "" {
			ctype = ct
		}
	}
	u := r.URL()
	var waited time.Duration
	for attempt := 0; ; attempt++ {
		if c.limiter != nil {
			if err := c.limiter.Wait(ctx); err != nil {
				return nil, fmt.Errorf("rest: %s %s: %w", r.method, u.Path, context.Cause(ctx))
			}
		}
		req, err := http.NewRequestWithContext(ctx, r.method, u.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("rest: %w", err)
		}
		if body != nil {
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			req.Header.Set("Content-Type", ctype)
		}
		for k, vs := range r.header {
			req.Header[k] = vs
		}
		if req.Header.Get("Accept") == "" {
			req.Header.Set("Accept", accept)
		}
		var span trace.Span
		if c.tracer != nil {
			span = r.startSpan(ctx, req, u, attempt)
		}
		start := c.clock.Now()
		resp, err := c.hc.Do(req)
		latency := c.clock.Now().Sub(start)
		if err != nil {
			err = classifyTLS(u.Host, err)
		}

		retry := attempt < c.retry.MaxRetries && c.retry.MaxRetries > 0 && retryable(ctx, r.method, resp, err)
		var wait time.Duration
		if retry {
			wait = c.retry.retryWait(resp, attempt)
			if waited+wait > c.retry.MaxWait {
				retry = false
			}
		}
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		if span != nil {
			endSpan(span, code, err)
		}
		if c.observer != nil {
			c.observer.ObserveRequest(ctx, RequestInfo{
				Method: r.method, Host: u.Host, Resource: r.res, Subresource: r.sub, Path: u.Path,
				Code: code, Err: err, Latency: latency, Attempt: attempt, Retrying: retry, RetryAfter: wait,
			})
		}
		if c.logger.Enabled(ctx, debugLevel) {
			attrs := []any{"method", r.method, "url", u.String(), "code", code, "latency", latency, "attempt", attempt}
			if err != nil {
				attrs = append(attrs, "error", err.Error())
			}
			if retry {
				attrs = append(attrs, "retryAfter", wait)
			}
			c.logger.DebugContext(ctx, "request", attrs...)
		}
		if retry {
			if resp != nil {
				drain(resp.Body)
			}
			if err := sleep(ctx, c, wait); err != nil {
				return nil, fmt.Errorf("rest: %s %s: %w", r.method, u.Path, context.Cause(ctx))
			}
			waited += wait
			continue
		}
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil, fmt.Errorf("rest: %s %s: %w", r.method, u.Path, context.Cause(ctx))
			}
			return nil, fmt.Errorf("rest: %s %s: %w", r.method, u.Path, err)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			return nil, newStatusError(r.method, u.Path, resp.StatusCode, resp.Header.Get("Content-Type"), b, ra)
		}
		return resp, nil
	}
}

func sleep(ctx context.Context, c *Client, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// debugLevel is the level of the per-request log lines.
const debugLevel = slog.LevelDebug
