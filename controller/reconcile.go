package controller

import (
	"errors"
	"time"
)

// Request names the object to reconcile. Namespace is empty for a
// cluster-scoped object.
type Request struct {
	Namespace, Name string
}

// String returns "namespace/name", or "name" for a cluster-scoped object.
func (r Request) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// Result says when to reconcile a key again without a change. The zero
// Result means: not until something changes.
type Result struct {
	// RequeueAfter, when positive, reconciles the key again after this
	// long.
	RequeueAfter time.Duration
	// Priority is the work queue priority of the key's next reconcile
	// when this one asks for one: through RequeueAfter, or by failing with
	// an error that is not terminal (the retry after the rate limiter's
	// delay). Higher is reconciled first; workqueue.PriorityLow is that
	// of the objects of the initial list and of resyncs. A key that is
	// queued already, or gets queued by a change meanwhile, keeps the
	// higher of the two priorities. The zero value is
	// workqueue.PriorityNormal, the priority of a change: the key is not
	// put behind a backlog of unchanged objects.
	Priority int
}

type terminalError struct{ err error }

func (e terminalError) Error() string { return "terminal error: " + e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// TerminalError marks err as one that retrying cannot fix: the controller
// logs it and does not requeue the key. A nil err stays nil.
func TerminalError(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

// IsTerminal reports whether err was marked with TerminalError.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}
