package rest

import (
	"context"
	"time"
)

// Observer is told about every attempt of every request, for metrics and
// tracing. Implementations must be safe for concurrent use and fast; they
// run on the request path.
type Observer interface {
	// ObserveRequest is called once per attempt, after the response
	// headers arrive or the attempt fails.
	ObserveRequest(ctx context.Context, info RequestInfo)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, info RequestInfo)

// ObserveRequest calls f.
func (f ObserverFunc) ObserveRequest(ctx context.Context, info RequestInfo) { f(ctx, info) }

// RequestInfo describes one attempt. For metric labels use Method, Host,
// Resource, Subresource and Code; Path holds object names and has high
// cardinality.
type RequestInfo struct {
	// Method is the HTTP method.
	Method string
	// Host is the API server's host (and port, if the URL has one), as in
	// the request URL.
	Host string
	// Resource and Subresource are as given to the request builder (empty
	// for AbsPath requests).
	Resource, Subresource string
	// Path is the URL path, without query.
	Path string
	// Code is the HTTP status code, or 0 if no response arrived.
	Code int
	// Err is the transport error, if no response arrived.
	Err error
	// Latency is the time until the response headers (or the error).
	Latency time.Duration
	// Attempt counts from 0; Attempt > 0 means this was a retry.
	Attempt int
	// Retrying says that another attempt follows.
	Retrying bool
	// RetryAfter is the wait before that attempt.
	RetryAfter time.Duration
}
