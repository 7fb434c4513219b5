package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/moby/spdystream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/rest"
)

// StreamProtocol says how [Exec], [Attach] and [PortForward] carry their
// streams to the API server.
type StreamProtocol int

const (
	// StreamAuto tries WebSocket first and falls back to SPDY when the
	// server refuses the WebSocket upgrade, or agrees to none of the
	// WebSocket subprotocols offered.
	StreamAuto StreamProtocol = iota
	// StreamWebSocket uses WebSocket only: v5.channel.k8s.io (or
	// v4.channel.k8s.io where the server offers only that) for exec and
	// attach, and SPDY/3.1 tunnelled over WebSocket for port-forward.
	StreamWebSocket
	// StreamSPDY uses SPDY/3.1 only, as servers before WebSocket support
	// need.
	StreamSPDY
)

func (p StreamProtocol) String() string {
	switch p {
	case StreamAuto:
		return "auto"
	case StreamWebSocket:
		return "WebSocket"
	case StreamSPDY:
		return "SPDY"
	}
	return fmt.Sprintf("StreamProtocol(%d)", int(p))
}

// Subprotocols of exec, attach and port-forward.
const (
	protocolV5         = "v5.channel.k8s.io"
	protocolV4         = "v4.channel.k8s.io"
	protocolPortFwd    = "portforward.k8s.io"
	tunnelPrefix       = "SPDY/3.1+"
	headerStreamProto  = "X-Stream-Protocol-Version"
	streamReplyTimeout = 30 * time.Second
)

// UpgradeError is returned by [Exec], [Attach] and [PortForward] when the
// API server does not open the streams: it answered the upgrade request
// with StatusCode instead of 101 Switching Protocols (with Status, the
// reason it gave, when it sent one), or switched to a protocol none of
// those offered. When Status is set, errors.As finds an
// *apierrors.StatusError in it, so apierrors.IsNotFound, IsForbidden and
// the like work on it.
type UpgradeError struct {
	// Op is "exec", "attach" or "portforward".
	Op string
	// Namespace and Pod name the Pod.
	Namespace, Pod string
	// Transport is "WebSocket" or "SPDY".
	Transport string
	// StatusCode is the HTTP status of the answer; 101 when the server
	// switched protocols but to none offered.
	StatusCode int
	// Status is the metav1.Status the server sent with a refusal, or nil.
	Status *metav1.Status
	// Message is the server's reason: the Status message, the body of
	// the answer, or what was wrong with the protocol.
	Message string
}

func (e *UpgradeError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("client: %s pod %s/%s: the server refused the %s upgrade (%d): %s", e.Op, e.Namespace, e.Pod, e.Transport, e.StatusCode, msg)
}

// Unwrap returns the server's Status as an *apierrors.StatusError, or nil.
func (e *UpgradeError) Unwrap() error {
	if e.Status == nil {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: *e.Status}
}

// fallback reports whether a refused WebSocket upgrade is worth trying
// again over SPDY: not when the server said who may not do what, or that
// the Pod is not there, which SPDY would hear again.
func (e *UpgradeError) fallback() bool {
	switch e.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return e.Status == nil
	}
	return true
}

// ContainerNotFoundError is returned by [Exec] and [Attach] when the Pod
// has no container of the name asked for. Err is the server's refusal.
type ContainerNotFoundError struct {
	Namespace, Pod, Container string
	// Containers are the names the Pod has: containers, then init and
	// ephemeral containers.
	Containers []string
	Err        error
}

func (e *ContainerNotFoundError) Error() string {
	return fmt.Sprintf("client: pod %s/%s has no container %q (it has %s)", e.Namespace, e.Pod, e.Container, strings.Join(e.Containers, ", "))
}

func (e *ContainerNotFoundError) Unwrap() error { return e.Err }

// streamTarget is a Pod subresource to open streams on.
type streamTarget struct {
	op        string // exec, attach, portforward
	namespace string
	pod       string
	rc        *rest.Client
	url       *url.URL
}

func (t *streamTarget) refused(transport string, resp *http.Response) *UpgradeError {
	e := &UpgradeError{Op: t.op, Namespace: t.namespace, Pod: t.pod, Transport: transport, StatusCode: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		if st.Code == 0 {
			st.Code = int32(resp.StatusCode)
		}
		e.Status, e.Message = &st, st.Message
	} else {
		e.Message = strings.TrimSpace(string(body))
	}
	return e
}

// dialWebSocket opens a WebSocket to the target through the Client's
// HTTP client, so that authentication, TLS and proxy are the Client's,
// offering protocols in order of preference. gorilla/websocket frames the
// messages; it writes its handshake to a handshakeConn, which sends it as
// an HTTP request and hands back the server's answer.
func (t *streamTarget) dialWebSocket(ctx context.Context, protocols []string) (*websocket.Conn, error) {
	hc := &handshakeConn{ctx: ctx, hc: t.rc.HTTPClient(), target: t.url}
	d := websocket.Dialer{
		NetDialContext: func(context.Context, string, string) (net.Conn, error) { return hc, nil },
		Subprotocols:   protocols,
		// Buffers as large as the kubelet's copy buffers.
		ReadBufferSize:  32 << 10,
		WriteBufferSize: 32 << 10,
	}
	u := *t.url
	u.Scheme = "ws"
	ws, _, err := d.DialContext(ctx, u.String(), nil)
	if err != nil {
		hc.mu.Lock()
		resp, herr := hc.resp, hc.err
		hc.mu.Unlock()
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, t.refused("WebSocket", resp)
		}
		hc.Close()
		if herr != nil {
			err = herr // what the HTTP client said, rather than the dialer's echo of it
		}
		return nil, fmt.Errorf("client: %s pod %s/%s: WebSocket upgrade: %w", t.op, t.namespace, t.pod, err)
	}
	if !contains(protocols, ws.Subprotocol()) {
		ws.Close()
		return nil, &UpgradeError{Op: t.op, Namespace: t.namespace, Pod: t.pod, Transport: "WebSocket", StatusCode: http.StatusSwitchingProtocols,
			Message: fmt.Sprintf("the server chose subprotocol %q, not one of %s", ws.Subprotocol(), strings.Join(protocols, ", "))}
	}
	return ws, nil
}

// dialSPDY opens a SPDY/3.1 connection to the target with method (POST,
// as kubectl sends), offering protocols in order of preference, and
// returns it with the protocol the server chose.
func (t *streamTarget) dialSPDY(ctx context.Context, method string, protocols []string) (*spdySession, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.url.String(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	for _, p := range protocols {
		req.Header.Add(headerStreamProto, p)
	}
	resp, err := t.rc.UpgradeClient().Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("client: %s pod %s/%s: SPDY upgrade: %w", t.op, t.namespace, t.pod, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, "", t.refused("SPDY", resp)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, "", fmt.Errorf("client: %s pod %s/%s: SPDY upgrade: the HTTP transport gives no connection after 101", t.op, t.namespace, t.pod)
	}
	proto := resp.Header.Get(headerStreamProto)
	if !strings.EqualFold(resp.Header.Get("Upgrade"), "SPDY/3.1") || !contains(protocols, proto) {
		rwc.Close()
		return nil, "", &UpgradeError{Op: t.op, Namespace: t.namespace, Pod: t.pod, Transport: "SPDY", StatusCode: resp.StatusCode,
			Message: fmt.Sprintf("the server switched to %q with stream protocol %q, not SPDY/3.1 with one of %s", resp.Header.Get("Upgrade"), proto, strings.Join(protocols, ", "))}
	}
	sess, err := newSPDYClient(&streamConn{ReadWriteCloser: rwc})
	if err != nil {
		return nil, "", err
	}
	return sess, proto, nil
}

// newSPDYClient starts a client SPDY connection over c; the streams the
// server would start are refused.
func newSPDYClient(c net.Conn) (*spdySession, error) {
	conn, err := spdystream.NewConnection(c, false)
	if err != nil {
		c.Close()
		return nil, err
	}
	go conn.Serve(func(s *spdystream.Stream) { _ = s.Refuse() })
	go keepAlive(conn.CloseChan(), func() error { _, err := conn.Ping(); return err })
	return &spdySession{conn: conn, raw: c}, nil
}

// pingPeriod is how often an idle-looking connection is pinged, so that
// proxies and load balancers on the way do not close it while a shell
// waits for its user or a forwarded connection for its next request.
const pingPeriod = 15 * time.Second

// keepAlive calls ping every pingPeriod until done closes or ping fails.
func keepAlive[T any](done <-chan T, ping func() error) {
	t := time.NewTicker(pingPeriod)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if ping() != nil {
				return
			}
		}
	}
}

// createStream opens a stream with headers and waits for the server's
// reply, as the kubelet creates its side of each stream when it sees it.
func createStream(conn *spdystream.Connection, headers http.Header) (*spdystream.Stream, error) {
	s, err := conn.CreateStream(headers, nil, false)
	if err != nil {
		return nil, err
	}
	if err := s.WaitTimeout(streamReplyTimeout); err != nil {
		return nil, fmt.Errorf("stream %s: %w", headers.Get("streamType"), err)
	}
	return s, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// streamConn is a connection handed over by an HTTP upgrade, as a
// net.Conn. Deadlines are not supported: closing it ends blocked reads
// and writes.
type streamConn struct {
	io.ReadWriteCloser
}

func (streamConn) LocalAddr() net.Addr              { return upgradedAddr{} }
func (streamConn) RemoteAddr() net.Addr             { return upgradedAddr{} }
func (streamConn) SetDeadline(time.Time) error      { return nil }
func (streamConn) SetReadDeadline(time.Time) error  { return nil }
func (streamConn) SetWriteDeadline(time.Time) error { return nil }
func (upgradedAddr) Network() string                { return "upgraded" }
func (upgradedAddr) String() string                 { return "upgraded" }

type upgradedAddr struct{}

// handshakeConn stands in for the network connection of a WebSocket
// dialer: it collects the dialer's handshake request, sends it with the
// Client's HTTP client (which switches protocols over an HTTP/1.1
// connection of its own), plays the answer back to the dialer, and from
// then on reads and writes the upgraded connection.
type handshakeConn struct {
	ctx    context.Context
	hc     *http.Client
	target *url.URL

	mu   sync.Mutex
	req  bytes.Buffer
	ans  *bytes.Reader      // the answer's head, then conn
	conn io.ReadWriteCloser // after 101
	resp *http.Response
	err  error
	done chan struct{} // closed once the answer is in
	once sync.Once
}

func (h *handshakeConn) init() {
	h.once.Do(func() { h.done = make(chan struct{}) })
}

func (h *handshakeConn) Write(p []byte) (int, error) {
	h.init()
	h.mu.Lock()
	conn := h.conn
	if conn == nil && h.resp == nil && h.err == nil {
		h.req.Write(p)
		complete := bytes.Contains(h.req.Bytes(), []byte("\r\n\r\n"))
		h.mu.Unlock()
		if complete {
			h.roundTrip()
		}
		return len(p), nil
	}
	h.mu.Unlock()
	if conn == nil {
		return 0, net.ErrClosed
	}
	return conn.Write(p)
}

// roundTrip sends the collected handshake request.
func (h *handshakeConn) roundTrip() {
	defer close(h.done)
	fail := func(err error) {
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
	}
	parsed, err := http.ReadRequest(bufioReader(h.req.Bytes()))
	if err != nil {
		fail(err)
		return
	}
	req, err := http.NewRequestWithContext(h.ctx, http.MethodGet, h.target.String(), nil)
	if err != nil {
		fail(err)
		return
	}
	for k, vs := range parsed.Header {
		req.Header[k] = vs
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		fail(err)
		return
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	resp.Header.Write(&head)
	head.WriteString("\r\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resp = resp
	if resp.StatusCode != http.StatusSwitchingProtocols {
		// The dialer reads nothing and fails; the caller reads the
		// refusal from resp.
		return
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		h.err = errors.New("the HTTP transport gives no connection after 101")
		return
	}
	h.conn = rwc
	h.ans = bytes.NewReader(head.Bytes())
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

func (h *handshakeConn) Read(p []byte) (int, error) {
	h.init()
	select {
	case <-h.done:
	case <-h.ctx.Done():
		return 0, h.ctx.Err()
	}
	h.mu.Lock()
	ans, conn, err := h.ans, h.conn, h.err
	h.mu.Unlock()
	if ans != nil && ans.Len() > 0 {
		return ans.Read(p)
	}
	if err != nil {
		return 0, err
	}
	if conn == nil {
		return 0, io.EOF
	}
	return conn.Read(p)
}

func (h *handshakeConn) Close() error {
	h.mu.Lock()
	conn := h.conn
	h.conn = nil
	if h.err == nil {
		h.err = net.ErrClosed
	}
	h.mu.Unlock()
	if conn != nil {
		return conn.Close()
	}
	return nil
}

func (*handshakeConn) LocalAddr() net.Addr              { return upgradedAddr{} }
func (*handshakeConn) RemoteAddr() net.Addr             { return upgradedAddr{} }
func (*handshakeConn) SetDeadline(time.Time) error      { return nil }
func (*handshakeConn) SetReadDeadline(time.Time) error  { return nil }
func (*handshakeConn) SetWriteDeadline(time.Time) error { return nil }
