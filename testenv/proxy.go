package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy stands between clients and kube-apiserver and breaks their
// connections on demand, the way networks, load balancers and restarts
// do: it can close them cleanly, reset them, cut them halfway through
// something the server is sending, or stop all traffic for a while.
//
// It terminates TLS with a certificate from the Env's CA and speaks
// HTTP/1.1 on both sides, so each watch has a connection of its own and a
// cut can land inside a watch event. Towards kube-apiserver every request
// authenticates as the Env's admin, whatever credentials the client
// presents: use it for fault injection, not for testing authorization.
//
// Create it with Env.StartProxy; it is stopped with the Env, or by Close.
type Proxy struct {
	// URL is the proxy's address, https://127.0.0.1:<port>.
	URL string
	// Kubeconfig is an admin kubeconfig whose server is the proxy.
	Kubeconfig []byte

	l        net.Listener
	target   string
	serverTC *tls.Config // towards clients
	clientTC *tls.Config // towards kube-apiserver

	mu      sync.Mutex
	links   map[*link]struct{}
	healed  chan struct{} // closed while traffic flows; open during a partition
	closed  bool
	wg      sync.WaitGroup
	counter atomic.Int64 // connections accepted
	broken  atomic.Int64 // connections broken by Cut, Reset or Truncate
}

// handshakeTimeout bounds each side's connection set-up.
const handshakeTimeout = 10 * time.Second

// link is one client connection and its upstream twin.
type link struct {
	client   net.Conn // the accepted TCP connection (for RST)
	down, up net.Conn // TLS towards the client and the server
	truncate atomic.Bool
	once     sync.Once
}

// StartProxy starts a Proxy in front of kube-apiserver on a free port of
// 127.0.0.1.
func (e *Env) StartProxy() (*Proxy, error) {
	certPEM, keyPEM, err := e.ServingCert("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	serving, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	admin, err := tls.X509KeyPair(e.AdminCertPEM, e.AdminKeyPEM)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.CAPEM)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testenv: proxy: %w", err)
	}
	healed := make(chan struct{})
	close(healed)
	target := e.URL[len("https://"):]
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("testenv: proxy: %w", err)
	}
	p := &Proxy{
		URL:      "https://" + l.Addr().String(),
		l:        l,
		target:   target,
		serverTC: &tls.Config{Certificates: []tls.Certificate{serving}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12},
		clientTC: &tls.Config{Certificates: []tls.Certificate{admin}, RootCAs: roots, ServerName: host, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12},
		links:    map[*link]struct{}{},
		healed:   healed,
	}
	p.Kubeconfig = kubeconfig(p.URL, e.CAPEM, "admin", e.AdminCertPEM, e.AdminKeyPEM)
	p.wg.Go(p.accept)
	e.mu.Lock()
	e.proxies = append(e.proxies, p)
	e.mu.Unlock()
	return p, nil
}

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.counter.Add(1)
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve completes both TLS handshakes and forwards until either side ends.
func (p *Proxy) serve(c net.Conn) {
	if !p.waitHealed() {
		c.Close()
		return
	}
	// Handshakes and dials are bounded, so that Close never waits on a
	// peer that went quiet.
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	down := tls.Server(c, p.serverTC)
	if err := down.Handshake(); err != nil {
		c.Close()
		return
	}
	upRaw, err := net.DialTimeout("tcp", p.target, handshakeTimeout)
	if err != nil {
		c.Close() // the server is down: the client sees a closed connection
		return
	}
	_ = upRaw.SetDeadline(time.Now().Add(handshakeTimeout))
	up := tls.Client(upRaw, p.clientTC)
	if err := up.Handshake(); err != nil {
		upRaw.Close()
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	_ = upRaw.SetDeadline(time.Time{})
	l := &link{client: c, down: down, up: up}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close(false)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
		l.close(false)
	}()
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(l, up, down, false); l.close(false) })
	p.copy(l, down, up, true)
	l.close(false)
	wg.Wait()
}

// copy forwards src to dst. fromServer marks the direction in which
// Truncate cuts.
func (p *Proxy) copy(l *link, dst, src net.Conn, fromServer bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitHealed() {
				return
			}
			if fromServer && n > 1 && l.truncate.Load() {
				_, _ = dst.Write(buf[:n/2])
				if l.close(true) {
					p.broken.Add(1)
				}
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close ends both sides of the link; with reset, the client's TCP
// connection is aborted (RST) instead of closed. It reports whether this
// call closed it.
func (l *link) close(reset bool) (closed bool) {
	l.once.Do(func() {
		closed = true
		if reset {
			if tc, ok := l.client.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = l.client.Close()
		} else {
			_ = l.down.Close()
		}
		_ = l.up.Close()
	})
	return closed
}

// waitHealed blocks during a partition; false once the proxy is closed.
func (p *Proxy) waitHealed() bool {
	p.mu.Lock()
	ch, closed := p.healed, p.closed
	p.mu.Unlock()
	if closed {
		return false
	}
	<-ch
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

// each applies f to every open link and returns how many there were.
func (p *Proxy) each(f func(*link)) int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		f(l)
	}
	return len(links)
}

// Cut closes every open connection cleanly (TLS close_notify, then FIN),
// as a server or load balancer that ends connections does. It returns how
// many it closed. New connections are accepted as before.
func (p *Proxy) Cut() int { return p.each(func(l *link) { p.breakLink(l, false) }) }

func (p *Proxy) breakLink(l *link, reset bool) {
	if l.close(reset) {
		p.broken.Add(1)
	}
}

// Reset aborts every open connection with a TCP RST, as a crashed peer or
// a middlebox that forgets the connection does. It returns how many.
func (p *Proxy) Reset() int { return p.each(func(l *link) { p.breakLink(l, true) }) }

// Truncate makes every open connection end halfway through the next data
// the server sends on it (half a watch event, say), with a TCP RST. It
// returns how many connections it armed; each is cut when the server next
// writes to it.
func (p *Proxy) Truncate() int { return p.each(func(l *link) { l.truncate.Store(true) }) }

// Partition stops all traffic, in both directions, until Heal: open
// connections stay open but carry nothing, and new ones are accepted but
// not answered, as when a network path goes dark.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
		p.healed = make(chan struct{})
	default: // already partitioned
	}
}

// Heal ends a Partition; what was held back flows on.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
	default:
		close(p.healed)
	}
}

// Connections returns how many connections the proxy has accepted so far.
func (p *Proxy) Connections() int64 { return p.counter.Load() }

// Broken returns how many connections Cut, Reset and Truncate have broken
// so far (an armed Truncate counts once it has cut).
func (p *Proxy) Broken() int64 { return p.broken.Load() }

// Close stops the proxy and closes every connection. Env.Stop closes its
// proxies too.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	select {
	case <-p.healed:
	default:
		close(p.healed)
	}
	p.mu.Unlock()
	err := p.l.Close()
	p.each(func(l *link) { l.close(true) })
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
