package rest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loom-k8s/loom/internal/intern"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// StatusError is returned for a non-2xx response. It carries the server's
// metav1.Status and implements apierrors.APIStatus, so the apimachinery
// predicates work on it and on errors that wrap it:
//
//	if apierrors.IsNotFound(err) { ... }
//
// When the body is not a Status (a proxy's HTML page, say), Status is
// synthesized from the HTTP code, with a reason chosen the way the API
// server would and the start of the body as the message.
type StatusError struct {
	// ErrStatus is the server's status.
	ErrStatus metav1.Status
	// Method and Path describe the request (the path has no query).
	Method, Path string
	// Code is the HTTP status code.
	Code int
}

// Status implements apierrors.APIStatus.
func (e *StatusError) Status() metav1.Status { return e.ErrStatus }

// Error returns "<method> <path>: <code>: <message>".
func (e *StatusError) Error() string {
	msg := e.ErrStatus.Message
	if msg == "" {
		msg = string(e.ErrStatus.Reason)
	}
	if e.Path == "" {
		return fmt.Sprintf("%s: %d: %s", e.Method, e.Code, msg)
	}
	return fmt.Sprintf("%s %s: %d: %s", e.Method, e.Path, e.Code, msg)
}

var _ apierrors.APIStatus = (*StatusError)(nil)

const maxErrorBody = 1 << 20

// newStatusError builds a StatusError from a response body that may or may
// not hold a Status.
func newStatusError(method, path string, code int, contentType string, body []byte, retryAfter int) *StatusError {
	e := &StatusError{Method: method, Path: path, Code: code}
	var st metav1.Status
	if err := decodeInto(mediaType(contentType), body, &st, intern.Options{}); err == nil && (st.Kind == "Status" || st.Status == metav1.StatusFailure) {
		if st.Code == 0 {
			st.Code = int32(code)
		}
		e.ErrStatus = st
		return e
	}
	msg := bodySnippet(body)
	e.ErrStatus = apierrors.NewGenericServerResponse(code, method, schema.GroupResource{}, "", msg, retryAfter, true).ErrStatus
	if generic := e.ErrStatus.Message; msg != "" && !strings.Contains(generic, msg) {
		// Keep the server's own words: they are often the only clue (a
		// proxy's error page, say).
		e.ErrStatus.Message = generic + ": " + msg
	}
	return e
}

// bodySnippet returns the start of a body as printable text.
func bodySnippet(b []byte) string {
	const max = 512
	if len(b) > max {
		b = b[:max]
	}
	if !utf8.Valid(b) {
		return fmt.Sprintf("(%d bytes of non-text body)", len(b))
	}
	return strings.TrimSpace(string(b))
}

// TLSVerificationError reports that the server's certificate could not be
// verified: an unknown CA, an expired certificate or a name mismatch. It
// wraps the crypto/x509 or crypto/tls error.
type TLSVerificationError struct {
	// Host is the server's host:port.
	Host string
	// Err is the crypto/x509 or crypto/tls error.
	Err error
}

// Error says that TLS verification failed and why.
func (e *TLSVerificationError) Error() string {
	return fmt.Sprintf("TLS verification of server %s failed: %v", e.Host, e.Err)
}

// Unwrap returns the underlying error.
func (e *TLSVerificationError) Unwrap() error { return e.Err }

// classifyTLS wraps certificate verification failures in a
// TLSVerificationError; other errors are returned unchanged.
func classifyTLS(host string, err error) error {
	if isTLSVerification(err) {
		return &TLSVerificationError{Host: host, Err: err}
	}
	return err
}

// isTLSVerification reports whether err is a certificate verification
// failure.
func isTLSVerification(err error) bool {
	var (
		cve *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		ci  x509.CertificateInvalidError
		he  x509.HostnameError
	)
	return errors.As(err, &cve) || errors.As(err, &ua) || errors.As(err, &ci) || errors.As(err, &he)
}

// DecodeError reports an undecodable watch frame, or an undecodable part
// of a list read as a stream. The watch ends after it. It never includes
// the frame's bytes, which may hold secrets.
type DecodeError struct {
	// Offset is the byte offset of the frame in the stream.
	Offset int64
	// Err is the cause, for example io.ErrUnexpectedEOF for a truncated
	// frame.
	Err error
}

// Error describes the failure.
func (e *DecodeError) Error() string {
	return "rest: decoding stream at byte " + strconv.FormatInt(e.Offset, 10) + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }
