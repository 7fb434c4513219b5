package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// probeCheck is a named check of /healthz or /readyz.
type probeCheck struct {
	name  string
	check func(*http.Request) error
}

// probeFailure is the error of a built-in check: a short reason of ours,
// shown as it is. Other errors are shown as "failed" and logged.
type probeFailure string

func (f probeFailure) Error() string { return string(f) }

// AddHealthzCheck adds a check to /healthz (Options.HealthAddr): the
// kubelet's liveness probe, which restarts the container when it fails. A
// request runs every check; when one returns an error, /healthz answers
// 503 with a line "name: failed" (the error itself goes to the log, not
// to the caller). The manager's own check is "ping", which always passes.
// It fails after Start, and for a name already taken.
func (m *Manager) AddHealthzCheck(name string, check func(*http.Request) error) error {
	return m.addCheck(&m.healthz, "healthz", name, check)
}

// AddReadyzCheck adds a check to /readyz (Options.HealthAddr): the
// readiness probe, which keeps the Pod out of its Services while it
// fails. It is answered as [Manager.AddHealthzCheck]'s are. The manager's
// own checks are "informers" (every informer of the factory has synced)
// and, with leader election, "leader-election" (the last attempt to
// acquire or renew the Lease did not fail, as a missing namespace or a
// Forbidden would keep this replica from ever leading). It fails after
// Start, and for a name already taken.
func (m *Manager) AddReadyzCheck(name string, check func(*http.Request) error) error {
	return m.addCheck(&m.readyz, "readyz", name, check)
}

func (m *Manager) addCheck(checks *[]probeCheck, kind, name string, check func(*http.Request) error) error {
	if name == "" || strings.ContainsAny(name, "\n\r") || check == nil {
		return fmt.Errorf("manager: %s check: a name (one line) and a function are required", kind)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return errStarted
	}
	for _, c := range *checks {
		if c.name == name {
			return fmt.Errorf("manager: %s check %q added twice", kind, name)
		}
	}
	*checks = append(*checks, probeCheck{name, check})
	return nil
}

// probe answers /healthz or /readyz from checks: 200 "ok" when every check
// passes, 503 with a line "name: reason" per failing check otherwise. With
// ?verbose, a line "name: ok" per passing check too.
func (m *Manager) probe(kind string, checks []probeCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, verbose := r.URL.Query()["verbose"]
		var b strings.Builder
		failed := false
		for _, c := range checks {
			err := c.check(r)
			switch {
			case err != nil:
				failed = true
				fmt.Fprintf(&b, "%s: %s\n", c.name, m.probeReason(kind, c.name, err))
			case verbose:
				fmt.Fprintf(&b, "%s: ok\n", c.name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			fmt.Fprintf(&b, "%s check failed\n", kind)
			w.WriteHeader(http.StatusServiceUnavailable)
		} else {
			b.WriteString("ok\n")
		}
		_, _ = w.Write([]byte(b.String()))
	}
}

// probeReason is what a failing check shows: a built-in check's short
// reason, or "failed" for a program's check, whose error is logged.
func (m *Manager) probeReason(kind, name string, err error) string {
	var f probeFailure
	if errors.As(err, &f) {
		return string(f)
	}
	m.log.Warn(kind+" check failed", "check", name, "err", err)
	return "failed"
}

// informersSynced is the "informers" readyz check.
func (m *Manager) informersSynced(r *http.Request) error {
	ctx, cancel := context.WithCancel(r.Context())
	cancel() // do not wait: report the state now
	if err := m.factory.WaitForCacheSync(ctx); err != nil {
		m.log.Debug("readyz: informers not synced", "err", err)
		if reason := apiReason(err); reason != "" {
			return probeFailure("not synced (" + reason + ")")
		}
		return probeFailure("not synced")
	}
	return nil
}

// leaseHealthy is the "leader-election" readyz check.
func (m *Manager) leaseHealthy(*http.Request) error {
	m.mu.Lock()
	e := m.elector
	m.mu.Unlock()
	if e == nil {
		return nil // not started yet
	}
	if err := e.LastError(); err != nil {
		return probeFailure("failed: " + shortReason(err))
	}
	return nil
}

// shortReason says in a few words of ours why a call to the API server
// failed, never in the server's (or the network's) words.
func shortReason(err error) string {
	if reason := apiReason(err); reason != "" {
		return reason
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &ne):
		return "API server unreachable"
	}
	return "error"
}

// apiReason is the reason of an API error, in lower-case words, or "".
func apiReason(err error) string {
	switch reason := apierrors.ReasonForError(err); reason {
	case metav1.StatusReasonUnknown:
		return ""
	case metav1.StatusReasonNotFound:
		return "not found"
	case metav1.StatusReasonForbidden:
		return "forbidden"
	case metav1.StatusReasonUnauthorized:
		return "unauthorized"
	case metav1.StatusReasonTimeout, metav1.StatusReasonServerTimeout:
		return "timeout"
	case metav1.StatusReasonTooManyRequests:
		return "too many requests"
	case metav1.StatusReasonInternalError:
		return "server error"
	case metav1.StatusReasonServiceUnavailable:
		return "server unavailable"
	default:
		return strings.ToLower(string(reason))
	}
}
