package rest

import (
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/loom-k8s/loom/config"
)

// headerTransport sets the user agent and the impersonation headers.
type headerTransport struct {
	next      http.RoundTripper
	userAgent string
	imp       config.Impersonation
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	needUA := req.Header.Get("User-Agent") == ""
	if !needUA && t.imp.User == "" {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	if needUA {
		req.Header.Set("User-Agent", t.userAgent)
	}
	if t.imp.User != "" {
		req.Header.Set("Impersonate-User", t.imp.User)
		if t.imp.UID != "" {
			req.Header.Set("Impersonate-Uid", t.imp.UID)
		}
		for _, g := range t.imp.Groups {
			req.Header.Add("Impersonate-Group", g)
		}
		keys := make([]string, 0, len(t.imp.Extra))
		for k := range t.imp.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, v := range t.imp.Extra[k] {
				req.Header.Add("Impersonate-Extra-"+escapeExtraKey(k), v)
			}
		}
	}
	return t.next.RoundTrip(req)
}

// escapeExtraKey percent-encodes the bytes of an extra key that may not
// appear in a header name, as the API server expects.
func escapeExtraKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if isTokenChar(c) && c != '%' {
			b.WriteByte(c)
			continue
		}
		const hex = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&'*+-.^_`|~", c) >= 0
}

// redactHeaders returns headers for logging with credentials masked:
// Authorization keeps only its scheme.
func redactHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		v := strings.Join(vs, ", ")
		switch http.CanonicalHeaderKey(k) {
		case "Authorization", "Proxy-Authorization":
			v = maskAuthorization(v)
		case "Cookie", "Set-Cookie":
			v = "<masked>"
		}
		out[k] = v
	}
	return out
}

func maskAuthorization(v string) string {
	if i := strings.IndexByte(v, ' '); i > 0 {
		return v[:i] + " <masked>"
	}
	return "<masked>"
}

// logTransport sits just above the HTTP transport and logs the headers
// actually sent, with credentials masked, when debug logging is on.
type logTransport struct {
	next   http.RoundTripper
	logger *slog.Logger
}

func (t *logTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.logger.Enabled(req.Context(), debugLevel) {
		t.logger.DebugContext(req.Context(), "request headers", "method", req.Method, "url", req.URL.String(), "headers", redactHeaders(req.Header))
	}
	return t.next.RoundTrip(req)
}
