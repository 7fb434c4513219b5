package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/moby/spdystream"
	corev1 "k8s.io/api/core/v1"
)

// PortForwardOptions configure [PortForward]. The zero value is valid: it
// opens the connection to the Pod and listens on no port, for
// [PortForwarder.Dial].
type PortForwardOptions struct {
	// Ports are the ports to forward, in kubectl's forms: "LOCAL:REMOTE",
	// ":REMOTE" or "0:REMOTE" (a free local port), and "PORT" (the same
	// port on both sides). Default: none.
	Ports []string
	// Addresses are the local addresses to listen on: IP addresses, or
	// "localhost" for both 127.0.0.1 and ::1 (one of which may fail).
	// Default: "localhost".
	Addresses []string
	// OnConnection is called as each local connection is accepted, with
	// the port it came to. Default: nil.
	OnConnection func(ForwardedPort)
	// OnError is called with the error of a forwarded connection, which
	// ends that connection only: the Pod refused it (nothing listens on
	// the port), or a stream broke. Default: nil, such errors are dropped.
	OnError func(error)
	// Protocol chooses WebSocket or SPDY. Default: StreamAuto.
	Protocol StreamProtocol
}

// ForwardedPort is a local listener forwarding to a port of the Pod.
type ForwardedPort struct {
	// Address is the local address listened on, such as "127.0.0.1".
	Address string
	// Local is the local port; Remote the Pod's.
	Local, Remote uint16
}

// PortForwardError is an error of one forwarded connection, with what the
// kubelet said.
type PortForwardError struct {
	Local, Remote uint16
	Message       string
}

func (e *PortForwardError) Error() string {
	return fmt.Sprintf("an error occurred forwarding %d -> %d: %s", e.Local, e.Remote, e.Message)
}

// ErrConnectionLost is the error of a [PortForwarder] whose connection to
// the server broke.
var ErrConnectionLost = errors.New("client: port-forward: the connection to the server was lost")

// PortForwarder forwards local ports to a Pod over one connection to the
// API server; see [PortForward].
type PortForwarder struct {
	namespace, pod string
	sess           *spdySession
	opts           PortForwardOptions
	ports          []ForwardedPort
	listeners      []net.Listener
	requestID      atomic.Int64

	done      chan struct{}
	closeOnce sync.Once
	err       error

	mu      sync.Mutex
	stopped bool
	conns   sync.WaitGroup
}

// PortForward connects to the named Pod, as kubectl port-forward does,
// and listens on the local ports of opts, forwarding each connection to
// its port of the Pod. It returns once every listener is bound; the
// forward goes on until ctx ends, [PortForwarder.Close] is called, or the
// connection to the server breaks ([PortForwarder.Done] then closes, and
// [PortForwarder.Err] says why). A port that cannot be bound on any of
// the addresses fails the call.
//
// PortForward does not look at the Pod's phase: the kubelet refuses
// connections to a Pod that is not running.
func PortForward(ctx context.Context, pods *Client[*corev1.Pod], name string, opts PortForwardOptions) (*PortForwarder, error) {
	type mapping struct{ local, remote uint16 }
	var maps []mapping
	for _, p := range opts.Ports {
		l, r, err := parsePortMapping(p)
		if err != nil {
			return nil, err
		}
		maps = append(maps, mapping{l, r})
	}
	res, ns, err := pods.named(ctx, "portforward", name)
	if err != nil {
		return nil, err
	}
	t := &streamTarget{op: "portforward", namespace: ns, pod: name, rc: pods.rc,
		url: pods.req(pods.rc.Get(), res, ns, asObject).Name(name).SubResource("portforward").URL()}
	sess, err := t.dialPortForward(ctx, opts.Protocol)
	if err != nil {
		return nil, err
	}
	f := &PortForwarder{namespace: ns, pod: name, sess: sess, opts: opts, done: make(chan struct{})}
	addrs := opts.Addresses
	if len(addrs) == 0 {
		addrs = []string{"localhost"}
	}
	for _, m := range maps {
		if err := f.listen(addrs, m.local, m.remote); err != nil {
			f.stop(nil)
			return nil, err
		}
	}
	go func() {
		select {
		case <-ctx.Done():
			f.stop(ctx.Err())
		case <-sess.conn.CloseChan():
			f.stop(ErrConnectionLost)
		case <-f.done:
		}
	}()
	return f, nil
}

// dialPortForward opens the SPDY connection of a port-forward: tunnelled
// over WebSocket, or directly.
func (t *streamTarget) dialPortForward(ctx context.Context, p StreamProtocol) (*spdySession, error) {
	if p != StreamSPDY {
		ws, err := t.dialWebSocket(ctx, []string{tunnelPrefix + protocolPortFwd})
		if err == nil {
			return newSPDYClient(&tunnelConn{ws: ws})
		}
		var ue *UpgradeError
		if p == StreamWebSocket || !errors.As(err, &ue) || !ue.fallback() {
			return nil, err
		}
	}
	sess, _, err := t.dialSPDY(ctx, "POST", []string{protocolPortFwd})
	return sess, err
}

// parsePortMapping reads "LOCAL:REMOTE", ":REMOTE" and "PORT".
func parsePortMapping(s string) (local, remote uint16, err error) {
	l, r, two := strings.Cut(s, ":")
	if !two {
		r = l
	}
	rp, err := strconv.ParseUint(r, 10, 16)
	if err != nil || rp == 0 {
		return 0, 0, fmt.Errorf("client: port-forward: invalid port %q in %q: want LOCAL:REMOTE, :REMOTE or PORT, ports from 1 to 65535", r, s)
	}
	if l == "" {
		return 0, uint16(rp), nil
	}
	lp, err := strconv.ParseUint(l, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("client: port-forward: invalid local port %q in %q", l, s)
	}
	return uint16(lp), uint16(rp), nil
}

// listen binds local on each address; a port 0 becomes the port the
// first listener got, for the others too.
func (f *PortForwarder) listen(addrs []string, local, remote uint16) error {
	type target struct{ network, host string }
	var targets []target
	for _, a := range addrs {
		if a == "localhost" {
			targets = append(targets, target{"tcp4", "127.0.0.1"}, target{"tcp6", "::1"})
			continue
		}
		ip := net.ParseIP(a)
		if ip == nil {
			return fmt.Errorf("client: port-forward: %q is not an IP address or localhost", a)
		}
		network := "tcp6"
		if ip.To4() != nil {
			network = "tcp4"
		}
		targets = append(targets, target{network, a})
	}
	var errs []error
	bound := 0
	for _, tg := range targets {
		l, err := net.Listen(tg.network, net.JoinHostPort(tg.host, strconv.Itoa(int(local))))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if local == 0 {
			local = uint16(l.Addr().(*net.TCPAddr).Port)
		}
		bound++
		p := ForwardedPort{Address: tg.host, Local: local, Remote: remote}
		f.listeners = append(f.listeners, l)
		f.ports = append(f.ports, p)
		go f.accept(l, p)
	}
	if bound == 0 || (len(errs) > 0 && !(len(addrs) == 1 && addrs[0] == "localhost")) {
		return fmt.Errorf("client: port-forward: listening on port %d: %w", local, errors.Join(errs...))
	}
	return nil
}

func (f *PortForwarder) accept(l net.Listener, p ForwardedPort) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.stopped {
			f.mu.Unlock()
			c.Close()
			return
		}
		f.conns.Add(1)
		f.mu.Unlock()
		if f.opts.OnConnection != nil {
			f.opts.OnConnection(p)
		}
		go func() {
			defer f.conns.Done()
			defer c.Close()
			if err := f.forward(c, p); err != nil && f.opts.OnError != nil {
				f.mu.Lock()
				stopped := f.stopped
				f.mu.Unlock()
				if !stopped {
					f.opts.OnError(err)
				}
			}
		}()
	}
}

// Ports returns the local listeners, in the order of opts.Ports and
// opts.Addresses, with the ports chosen for ":REMOTE".
func (f *PortForwarder) Ports() []ForwardedPort { return append([]ForwardedPort(nil), f.ports...) }

// Done is closed when the forward ends.
func (f *PortForwarder) Done() <-chan struct{} { return f.done }

// Err returns why the forward ended: nil after Close, ctx's error, or
// [ErrConnectionLost]. It returns nil while the forward goes on.
func (f *PortForwarder) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// Close stops listening, ends the forwarded connections and closes the
// connection to the server. It waits for the connections to end.
func (f *PortForwarder) Close() error {
	f.stop(nil)
	return nil
}

func (f *PortForwarder) stop(err error) {
	f.closeOnce.Do(func() {
		f.mu.Lock()
		f.stopped = true
		f.mu.Unlock()
		for _, l := range f.listeners {
			l.Close()
		}
		f.sess.Close()
		f.conns.Wait()
		f.err = err
		close(f.done)
	})
	<-f.done
}

// Dial opens a connection to port of the Pod through the forward, without
// a local listener. Closing the connection ends it; reading returns a
// [*PortForwardError] when the Pod refused it. ctx bounds the opening
// only.
func (f *PortForwarder) Dial(ctx context.Context, port uint16) (net.Conn, error) {
	type result struct {
		c   *forwardConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := f.open(ForwardedPort{Remote: port, Local: port})
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	case <-f.done:
		return nil, fmt.Errorf("client: port-forward to pod %s/%s has ended", f.namespace, f.pod)
	}
}

// open makes the pair of streams of one forwarded connection: the error
// stream, on which the kubelet reports a failure, and the data stream.
func (f *PortForwarder) open(p ForwardedPort) (*forwardConn, error) {
	id := strconv.FormatInt(f.requestID.Add(1)-1, 10)
	port := strconv.Itoa(int(p.Remote))
	errStream, err := f.sess.create(streamHeaders("streamType", "error", "port", port, "requestID", id))
	if err != nil {
		return nil, fmt.Errorf("client: port-forward to pod %s/%s, port %d: %w", f.namespace, f.pod, p.Remote, err)
	}
	// Nothing is written on the error stream.
	_ = errStream.Close()
	data, err := f.sess.create(streamHeaders("streamType", "data", "port", port, "requestID", id))
	if err != nil {
		f.sess.reset(errStream)
		return nil, fmt.Errorf("client: port-forward to pod %s/%s, port %d: %w", f.namespace, f.pod, p.Remote, err)
	}
	c := &forwardConn{Stream: data, errStream: errStream, sess: f.sess, port: p, errDone: make(chan struct{}), lost: f.sess.conn.CloseChan()}
	go c.readError()
	return c, nil
}

// forward copies between a local connection and a new stream pair.
func (f *PortForwarder) forward(local net.Conn, p ForwardedPort) error {
	remote, err := f.open(p)
	if err != nil {
		return err
	}
	defer remote.Close()
	up := make(chan struct{})
	go func() {
		defer close(up)
		// The local side's end is passed on as the stream's end, so
		// that a server that reads to the end answers.
		if _, err := io.Copy(remote.Stream, local); err == nil {
			_ = remote.Stream.Close()
		}
	}()
	_, err = io.Copy(local, remote)
	var pe *PortForwardError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// forwardConn is one forwarded connection: the data stream, and the
// kubelet's word on the error stream.
type forwardConn struct {
	*spdystream.Stream
	errStream *spdystream.Stream
	sess      *spdySession
	port      ForwardedPort
	errDone   chan struct{}
	errMsg    string
	lost      <-chan bool
	closeOnce sync.Once
}

func (c *forwardConn) readError() {
	defer close(c.errDone)
	b, _ := io.ReadAll(c.errStream)
	c.errMsg = string(b)
}

// Read reads the data stream; at its end, the error the kubelet reported,
// if any.
func (c *forwardConn) Read(p []byte) (int, error) {
	n, err := c.Stream.Read(p)
	if err == io.EOF {
		select {
		case <-c.errDone:
		case <-c.lost:
		}
		select {
		case <-c.errDone:
			if c.errMsg != "" {
				return n, &PortForwardError{Local: c.port.Local, Remote: c.port.Remote, Message: c.errMsg}
			}
		default:
		}
	}
	return n, err
}

// Close ends both streams.
func (c *forwardConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.Stream.Close()
		c.sess.reset(c.Stream, c.errStream)
	})
	return nil
}

// tunnelConn carries SPDY's bytes in binary WebSocket messages, for
// port-forward over WebSocket.
type tunnelConn struct {
	ws  *websocket.Conn
	cur io.Reader
	wmu sync.Mutex
}

func (c *tunnelConn) Read(p []byte) (int, error) {
	for {
		if c.cur == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					return 0, io.EOF
				}
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				return 0, fmt.Errorf("client: port-forward: a WebSocket message of type %d, not binary", typ)
			}
			c.cur = r
		}
		n, err := c.cur.Read(p)
		if err == io.EOF {
			c.cur = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (c *tunnelConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *tunnelConn) Close() error {
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	return c.ws.Close()
}

func (c *tunnelConn) LocalAddr() net.Addr                { return c.ws.LocalAddr() }
func (c *tunnelConn) RemoteAddr() net.Addr               { return c.ws.RemoteAddr() }
func (c *tunnelConn) SetDeadline(t time.Time) error      { return nil }
func (c *tunnelConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *tunnelConn) SetWriteDeadline(t time.Time) error { return nil }
