// Package rest talks to a Kubernetes API server: it builds an HTTP
// transport from a [config.Config], sends requests built with a small
// builder, decodes JSON and protobuf responses into caller-chosen types,
// and decodes watch streams into typed events.
//
// It is the layer typed clients are built on; most programs use those.
//
// # Getting started
//
//	cfg, err := config.Load(config.LoadOptions{})
//	...
//	c, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
//	...
//	var pod corev1.Pod
//	err = c.Get().Namespace("default").Resource("pods").Name("web-0").
//		Options(&metav1.GetOptions{}).Do(ctx, &pod)
//	if apierrors.IsNotFound(err) { ... }
//
//	w, err := rest.Watch[corev1.Pod](ctx, c.Get().Namespace("default").Resource("pods").
//		Options(&metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}))
//	...
//	defer w.Stop()
//	for {
//		ev, err := w.Next()
//		if err != nil { ... } // io.EOF: the server ended the watch
//		switch ev.Type { ... } // ev.Object is a *corev1.Pod
//	}
//
// # Transport
//
// [New] builds an http.Transport with TLS verification on (unless the
// Config says insecure-skip-tls-verify), the Config's CA, client
// certificate and tls-server-name, the proxy from proxy-url or the
// environment, HTTP/2 with health-check pings, keep-alives, and dial and
// TLS handshake timeouts. On top come authentication (bearer token, a
// token file re-read every minute and after a 401, basic auth, an exec
// credential plugin cached until its expiry or a 401, or an OIDC id-token
// refreshed at the issuer), impersonation headers and the user agent.
//
// # Rotated certificate files
//
// When the Config names files for the CA (certificate-authority, or the
// ca.crt of an in-cluster configuration) or for the client certificate and
// key (client-certificate, client-key), a Client follows them as they are
// rotated, so a long-running program keeps working when cert-manager, the
// kubelet or an administrator replaces them. Before a request is sent, at
// most once per [TLSReloadOptions.Interval] (a minute by default), the
// files are stat'ed; a file whose size, modification time or identity
// changed (new contents, or a new file renamed or linked over it) is read
// again. After a TLS verification failure or a 401 the files are looked
// at again within a second.
//
// New material goes into a new connection pool, and requests from then on
// use new connections: their handshakes present the new client
// certificate and verify the server against the new CA, with crypto/tls's
// usual checks of the chain and the server name. Requests and watches in
// flight are not interrupted: they finish on the connections they have,
// made with the old material, and those connections close once idle. A
// pool is replaced only when the contents changed, not on every stat
// change.
//
// A file that cannot be read, holds no certificate or key, or a
// certificate and key that do not go together (the certificate written,
// its key not yet) is not used: the Client keeps the last good CA or pair,
// logs an error that names the files to [Options.Logger], and reads the
// files again at the next check. A missing or bad file when [New] is
// called is still a [*config.Error].
//
// Inline data (certificate-authority-data, client-certificate-data,
// client-key-data) never changes. Not reloaded either: the CA of the oidc
// auth provider's issuer (idp-certificate-authority), the server address,
// tls-server-name, proxy-url and insecure-skip-tls-verify (load a new
// Config and make a new Client for those), and anything when
// [Options.Transport] replaces the transport. Set
// [TLSReloadOptions.Disabled] to read the files only once, in [New].
//
// # Credentials that are fetched
//
// An exec credential plugin runs once for all the requests that need a
// credential while it runs; each request waits on its own context, and a
// run that no request waits for any more is stopped. Plugins whose
// interactiveMode is IfAvailable or Always may prompt the user when
// [ExecOptions.Stdin] is a terminal (command-line programs pass os.Stdin);
// otherwise Always plugins fail with [ErrExecNeedsTerminal]. When a
// plugin returns a client certificate other than the one in use, requests
// from then on use new connections, as with rotated certificate files.
//
// The oidc auth provider sends the id-token while its exp claim is more
// than ten seconds away. When it is not, or the server answered 401 to it,
// the provider exchanges the refresh-token at the token endpoint named by
// the issuer's discovery document, once for all waiting requests, and
// writes the new tokens back to the kubeconfig user they came from
// (config.Auth.Origin and config.Auth.User). Failures are [*config.Error]
// values naming the kubeconfig field, wrapping an [*OIDCError],
// [ErrNoRefreshToken], [ErrNoTokenEndpoint] or [ErrNoIDToken].
//
// # Rate limiting and retries
//
// Client-side rate limiting is off by default: the API server's Priority
// and Fairness (APF) is the real limiter, and it answers 429 with
// Retry-After when a client should slow down. Set Config.QPS (and Burst)
// to turn a token bucket on.
//
// Idempotent requests are retried on 429, 503 and connection resets,
// honouring Retry-After, within the bounds of [RetryPolicy].
//
// # Content negotiation
//
// A Client asks for JSON, or with [Protobuf] for
// application/vnd.kubernetes.protobuf whenever the target type has a
// protobuf form. Types without one (unstructured objects, custom resources)
// are requested as JSON by the same client. Responses are decoded by their
// Content-Type. Objects decoded from protobuf get their apiVersion and kind
// filled in, so a protobuf and a JSON read of the same object are equal.
//
// # Lists
//
// A [ListStream] (a client.List is one) is decoded while the response
// arrives, one item at a time, through the buffer that reads watch frames:
// a page of a big list is never held whole. A malformed list, or one cut
// off within its items, is an error naming what was wrong; it never panics
// (fuzzed). When the decoder options a context carries (an informer's)
// know an item's object already at the item's resourceVersion, read from
// the wire first, that object stands for the item, which is not decoded. A
// watch asks the same about each ADDED event's object, which is how a
// streaming list (WatchList) arrives.
//
// # Watch
//
// [Watch] returns a [Watcher]; its Next method returns one [Event] at a
// time and io.EOF at the end. Pulling events (rather than receiving them on
// a channel) costs no goroutine hand-off per event, and lets the caller
// apply back-pressure. Frames are read into one reused buffer and decoded
// without intermediate copies: protobuf frames (a 4-byte big-endian length,
// then a metav1.WatchEvent whose object is a runtime.Unknown) are taken
// apart by a small hand-written reader; JSON frames are split at object
// boundaries and the object decoded in one pass. A truncated or garbage
// frame ends the watch with a [*DecodeError]; it never panics (fuzzed).
//
// Built-in types are decoded from protobuf by a reflective decoder
// (internal/protodec) rather than their generated Unmarshal methods: it
// copies each object's bytes into one string and slices every string field
// from it, and sizes repeated fields and maps once, which cuts allocations
// per Pod by about 3.5×. The strings of one decoded object therefore share
// one backing array; retaining any of them retains the object's encoded
// size, which matters only if you keep a few strings of many objects and
// drop the objects. Types it cannot plan fall back to the generated code.
// Likewise, JSON is decoded by internal/jsondec: a hand-written parser
// into maps for *unstructured.Unstructured, and a planned, reflective
// decoder for struct types, both with the semantics of apimachinery's
// util/json (field names match exactly; numbers in interface{} values are
// int64 unless they have a '.') and both checked against it by
// differential fuzzing. Unescaped strings share one copy of the object's
// bytes. Types jsondec cannot plan, and types that implement
// json.Unmarshaler themselves, go through encoding/json.
//
// # Errors
//
// A non-2xx response is a [*StatusError] carrying the server's
// metav1.Status; it implements apierrors.APIStatus, so
// apierrors.IsNotFound, IsConflict, IsGone, IsResourceExpired and the rest
// work on it. A certificate failure is a [*TLSVerificationError]. Problems
// with configuration files are [*config.Error] values naming the file and
// field.
//
// # Observability and logging
//
// An [Observer] sees every attempt (method, resource, code, latency,
// retries). With a Logger at debug level each attempt is logged with its
// headers; Authorization values are masked and bodies are never logged.
// Tokens, passwords and keys never appear in log lines or error strings.
// With Options.Tracing each attempt is an OpenTelemetry client span, a
// child of the span in the request's context, and the request carries its
// traceparent header (see package tracing).
package rest
