package rest

import (
	"crypto/tls"
	"net/http"
)

// UpgradeClient returns an *http.Client for requests that switch
// protocols (Connection: Upgrade) to anything but WebSocket, such as the
// SPDY streams of exec, attach and port-forward on servers without
// WebSocket support. HTTP/2 cannot switch protocols, so the connections
// of this client speak HTTP/1.1 only; in every other way they are the
// Client's: the same TLS settings and certificate files, proxy,
// authentication, user agent and impersonation. Connections are not
// pooled: when the server answers 101 Switching Protocols, the response's
// Body is an io.ReadWriteCloser over the connection, which the caller
// closes. As with [Client.HTTPClient], retries, rate limiting and
// observation are not applied.
//
// WebSocket upgrades need none of this: [Client.HTTPClient] sends them
// over an HTTP/1.1 connection of their own. When the Client was made with
// Options.Transport, UpgradeClient returns [Client.HTTPClient], and that
// transport decides.
func (c *Client) UpgradeClient() *http.Client {
	ht, ok := c.hc.Transport.(*headerTransport)
	if c.transport == nil || !ok {
		return c.hc
	}
	h1 := c.transport.cur.Load().Clone()
	h1.ForceAttemptHTTP2 = false
	h1.HTTP2 = nil
	h1.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	var p http.Protocols
	p.SetHTTP1(true)
	h1.Protocols = &p
	h1.DisableKeepAlives = true
	if h1.TLSClientConfig != nil {
		h1.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	auth := *c.auth
	auth.next = &logTransport{next: lastCheck{next: h1}, logger: c.logger}
	headers := *ht
	headers.next = &auth
	return &http.Client{Transport: &headers, CheckRedirect: c.hc.CheckRedirect}
}
