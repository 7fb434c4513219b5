package rest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/loom-k8s/loom/config"
)

// RetryPolicy bounds retries. A request is retried when it is idempotent
// (GET, HEAD, OPTIONS, PUT, DELETE) and the server answered 429 Too Many
// Requests or 503 Service Unavailable, or the connection was reset or
// refused before a response arrived. POST and PATCH are never retried: the
// server may have acted on them. A failure to get credentials (an exec
// plugin's, an OIDC refresh's: a *config.Error) is not retried either.
//
// The wait before a retry is the server's Retry-After when given, otherwise
// an exponential backoff. A retry is only made while the total wait stays
// within MaxWait; otherwise the last response or error is returned.
//
// The zero value means the defaults below.
type RetryPolicy struct {
	// MaxRetries is the most retries per request. Zero means 5; negative
	// turns retries off.
	MaxRetries int
	// MaxWait bounds the total time spent waiting between attempts of one
	// request. Zero means 30s.
	MaxWait time.Duration
	// Backoff is the first wait when the server gives no Retry-After; it
	// doubles per retry up to 8s, or up to 1s when no response arrived at
	// all (a refused or reset connection: probing a server that is not
	// there costs it nothing, and a restarted server is then found within
	// a second). Zero means 250ms.
	Backoff time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxRetries == 0 {
		p.MaxRetries = 5
	}
	if p.MaxWait == 0 {
		p.MaxWait = 30 * time.Second
	}
	if p.Backoff == 0 {
		p.Backoff = 250 * time.Millisecond
	}
	return p
}

const (
	maxBackoff      = 8 * time.Second
	maxProbeBackoff = time.Second // when no response arrived
)

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// retryable reports whether the outcome of an attempt may be retried.
func retryable(ctx context.Context, method string, resp *http.Response, err error) bool {
	if !idempotent(method) || ctx.Err() != nil {
		return false
	}
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			// Getting credentials failed (an exec plugin, an OIDC issuer
			// that refused a connection): not the API server's connection.
			return false
		}
		return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
			errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
}

// retryWait returns the wait before retry number n (0-based).
func (p RetryPolicy) retryWait(resp *http.Response, n int) time.Duration {
	if resp != nil {
		if s := resp.Header.Get("Retry-After"); s != "" {
			if secs, err := strconv.Atoi(s); err == nil && secs >= 0 {
				return time.Duration(secs) * time.Second
			}
			if t, err := http.ParseTime(s); err == nil {
				if d := time.Until(t); d > 0 {
					return d
				}
				return 0
			}
		}
	}
	limit := maxBackoff
	if resp == nil {
		limit = maxProbeBackoff
	}
	d := p.Backoff
	for i := 0; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
