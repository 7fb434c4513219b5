package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/moby/spdystream"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
)

func TestStatusError(t *testing.T) {
	exit := func(code string) []byte {
		b, _ := json.Marshal(metav1.Status{Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Message: "command terminated with non-zero exit code: error executing command [false], exit code " + code,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: code}}}})
		return b
	}
	success, _ := json.Marshal(metav1.Status{Status: metav1.StatusSuccess})
	internal, _ := json.Marshal(metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: "exec: \"nosuch\": executable file not found in $PATH"})
	for _, c := range []struct {
		name string
		data []byte
		code int    // with an *ExitError
		msg  string // otherwise, "" for nil
	}{
		{"nothing", nil, 0, ""},
		{"success", success, 0, ""},
		{"exit 1", exit("1"), 1, ""},
		{"exit 137", exit("137"), 137, ""},
		{"bad code", exit("x"), 0, `exit code "x"`},
		{"no exit code", internal, 0, "executable file not found"},
		{"not JSON", []byte("oops"), 0, "no Status"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := statusError(c.data)
			var ee *ExitError
			switch {
			case c.code != 0:
				if !errors.As(err, &ee) || ee.Code != c.code || ee.ExitCode() != c.code {
					t.Fatalf("got %v, want exit code %d", err, c.code)
				}
				if want := fmt.Sprintf("command terminated with exit code %d", c.code); err.Error() != want {
					t.Fatalf("message %q, want %q", err, want)
				}
			case c.msg == "":
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
			default:
				if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("got %v, want an error with %q", err, c.msg)
				}
			}
		})
	}
	var se *StatusError
	if err := statusError(internal); !errors.As(err, &se) || se.Status.Reason != metav1.StatusReasonInternalError {
		t.Fatalf("got %#v, want a *StatusError", err)
	}
}

func TestParsePortMapping(t *testing.T) {
	for _, c := range []struct {
		in            string
		local, remote uint16
		bad           bool
	}{
		{"8080:80", 8080, 80, false},
		{":80", 0, 80, false},
		{"0:80", 0, 80, false},
		{"5000", 5000, 5000, false},
		{"80:0", 0, 0, true},
		{"x:80", 0, 0, true},
		{"80:70000", 0, 0, true},
		{"", 0, 0, true},
	} {
		l, r, err := parsePortMapping(c.in)
		if (err != nil) != c.bad || l != c.local || r != c.remote {
			t.Errorf("parsePortMapping(%q) = %d, %d, %v", c.in, l, r, err)
		}
	}
}

// noLeaks checks, once the test and its cleanups are done, that no
// goroutine it started is left: call it first.
func noLeaks(t *testing.T) {
	current := goleak.IgnoreCurrent()
	// spdystream's shutdown ends a second after a close that failed
	// (the other side closed first); wait for it.
	t.Cleanup(func() {
		deadline := time.Now().Add(time.Minute)
		for {
			err := goleak.Find(current)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Error(err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// podsFor returns a Pod client for a test server.
func podsFor(t *testing.T, url string) *Client[*corev1.Pod] {
	t.Helper()
	rc, err := rest.New(config.Config{Host: url}, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	pods, err := For[corev1.Pod](rc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Namespace("ns")
}

func exitStatus(code int) []byte {
	b, _ := json.Marshal(metav1.Status{Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: fmt.Sprint(code)}}}})
	return b
}

// wsExecServer is an exec endpoint over WebSocket that speaks the given
// subprotocols: it echoes standard input to standard output, upper-cased,
// reports each resize on standard output, and at the end of standard input
// (v5's close signal, or "END\n" for v4) writes "bye" to standard error
// and exits with code 7.
func wsExecServer(t *testing.T, protocols ...string) *httptest.Server {
	up := websocket.Upgrader{Subprotocols: protocols}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/ns/pods/web/exec" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonNotFound, Code: 404, Message: `pods "other" not found`})
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		send := func(ch byte, s string) { _ = ws.WriteMessage(websocket.BinaryMessage, append([]byte{ch}, s...)) }
		send(channelStdout, "") // an empty message, as servers send to open a channel
		var in bytes.Buffer
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			switch {
			case msg[0] == channelStdin:
				in.Write(msg[1:])
				send(channelStdout, strings.ToUpper(string(msg[1:])))
			case msg[0] == channelResize:
				send(channelStdout, "resize "+string(msg[1:])+"\n")
			case msg[0] == channelClose && len(msg) == 2 && msg[1] == channelStdin:
				in.WriteString("END\n")
			}
			if strings.HasSuffix(in.String(), "END\n") {
				send(channelStderr, "bye\n")
				send(channelError, string(exitStatus(7)))
				_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestExecWebSocket(t *testing.T) {
	for _, protocol := range []string{protocolV5, protocolV4} {
		t.Run(protocol, func(t *testing.T) {
			noLeaks(t)
			srv := wsExecServer(t, protocol)
			pods := podsFor(t, srv.URL)
			stdin := "hello\n"
			if protocol == protocolV4 {
				stdin += "END\n" // v4 cannot say that standard input ended
			}
			var stdout, stderr bytes.Buffer
			err := Exec(t.Context(), pods, "web", ExecOptions{Command: []string{"sh", "-c", "upper"}, Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Protocol: StreamWebSocket})
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != 7 {
				t.Fatalf("Exec: %v, want exit code 7", err)
			}
			if stdout.String() != strings.ToUpper(stdin) || stderr.String() != "bye\n" {
				t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
			}
		})
	}
}

func TestExecWebSocketTTYResize(t *testing.T) {
	noLeaks(t)
	srv := wsExecServer(t, protocolV5)
	pods := podsFor(t, srv.URL)
	sizes := make(chan TerminalSize, 1)
	sizes <- TerminalSize{Width: 80, Height: 24}
	pr, pw := io.Pipe()
	var stdout syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Exec(t.Context(), pods, "web", ExecOptions{Command: []string{"sh"}, TTY: true, Stdin: pr, Stdout: &stdout, Resize: sizes})
	}()
	waitUntil(t, func() bool { return strings.Contains(stdout.String(), `resize {"Width":80,"Height":24}`) })
	sizes <- TerminalSize{Width: 100, Height: 40}
	waitUntil(t, func() bool { return strings.Contains(stdout.String(), `resize {"Width":100,"Height":40}`) })
	pw.Write([]byte("ls\n"))
	waitUntil(t, func() bool { return strings.Contains(stdout.String(), "LS\n") })
	pw.Close()
	var ee *ExitError
	if err := <-done; !errors.As(err, &ee) || ee.Code != 7 {
		t.Fatalf("Exec: %v", err)
	}
}

func TestExecQueryAndRefusal(t *testing.T) {
	noLeaks(t)
	var mu sync.Mutex
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/exec") {
			mu.Lock()
			query = r.URL.RawQuery
			mu.Unlock()
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/pods/web") && r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}, {Name: "side"}}}})
		case strings.HasSuffix(r.URL.Path, "/pods/web/exec"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonBadRequest, Code: 400, Message: "container nosuch is not valid for pod web"})
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonNotFound, Code: 404, Message: `pods "gone" not found`})
		}
	}))
	t.Cleanup(srv.Close)
	pods := podsFor(t, srv.URL)

	err := Exec(t.Context(), pods, "web", ExecOptions{Command: []string{"echo", "a b"}, Container: "nosuch", Stdout: io.Discard, Stderr: io.Discard, TTY: false})
	var cnf *ContainerNotFoundError
	if !errors.As(err, &cnf) || cnf.Container != "nosuch" || strings.Join(cnf.Containers, ",") != "main,side" {
		t.Fatalf("Exec in a missing container: %v", err)
	}
	var ue *UpgradeError
	if !errors.As(err, &ue) || ue.StatusCode != 400 || ue.Transport != "SPDY" || !apierrors.IsBadRequest(err) {
		t.Fatalf("Exec in a missing container: %#v, want the SPDY refusal after the WebSocket one", err)
	}
	mu.Lock()
	q := query
	mu.Unlock()
	if q != "command=echo&command=a+b&container=nosuch&stderr=true&stdout=true" {
		t.Fatalf("last query %q", q)
	}

	err = Exec(t.Context(), pods, "gone", ExecOptions{Command: []string{"true"}})
	if !apierrors.IsNotFound(err) || !errors.As(err, &ue) || ue.Transport != "WebSocket" {
		t.Fatalf("Exec in a missing pod: %v, want NotFound from the WebSocket upgrade, without falling back", err)
	}
	if err := Exec(t.Context(), pods, "web", ExecOptions{}); err == nil {
		t.Fatal("Exec without a command: no error")
	}
}

// spdyServer answers SPDY/3.1 upgrades with protocol, and refuses
// WebSocket ones as servers without WebSocket support do; serve gets
// the streams the client opens, as they come.
func spdyServer(t *testing.T, protocol string, serve func(done <-chan bool, streams <-chan *spdystream.Stream)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "this server does not speak WebSocket", http.StatusBadRequest)
			return
		}
		if !strings.EqualFold(r.Header.Get("Upgrade"), "SPDY/3.1") || !contains(r.Header.Values(headerStreamProto), protocol) {
			http.Error(w, "want SPDY/3.1 and "+protocol, http.StatusBadRequest)
			return
		}
		conn, bufrw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(bufrw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n%s: %s\r\n\r\n", headerStreamProto, protocol)
		bufrw.Flush()
		sc, err := spdystream.NewConnection(conn, true)
		if err != nil {
			t.Error(err)
			return
		}
		streams := make(chan *spdystream.Stream, 16)
		go sc.Serve(func(s *spdystream.Stream) {
			_ = s.SendReply(http.Header{}, false)
			streams <- s
		})
		serve(sc.CloseChan(), streams)
		<-sc.CloseChan()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestExecSPDYFallback runs Exec against a server that refuses WebSocket:
// the streams go over SPDY, with standard input's end as a half-close.
func TestExecSPDYFallback(t *testing.T) {
	noLeaks(t)
	srv := spdyServer(t, protocolV4, func(_ <-chan bool, streams <-chan *spdystream.Stream) {
		byType := map[string]*spdystream.Stream{}
		for len(byType) < 4 {
			s := <-streams
			byType[s.Headers().Get("streamType")] = s
		}
		io.Copy(byType["stdout"], byType["stdin"])
		byType["stderr"].Write([]byte("bye\n"))
		byType["error"].Write(exitStatus(3))
		for _, s := range byType {
			s.Close()
		}
	})
	pods := podsFor(t, srv.URL)
	var stdout, stderr bytes.Buffer
	err := Exec(t.Context(), pods, "web", ExecOptions{Command: []string{"cat"}, Stdin: strings.NewReader("over spdy\n"), Stdout: &stdout, Stderr: &stderr})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("Exec: %v, want exit code 3", err)
	}
	if stdout.String() != "over spdy\n" || stderr.String() != "bye\n" {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if err := Exec(t.Context(), pods, "web", ExecOptions{Command: []string{"cat"}, Protocol: StreamWebSocket}); !apierrors.IsBadRequest(err) && err == nil {
		t.Fatalf("Exec with WebSocket only against a server without it: %v", err)
	}
}

// servePortForward serves port-forward streams as a kubelet would: port
// 80 echoes, any other port is refused on the error stream.
func servePortForward(done <-chan bool, streams <-chan *spdystream.Stream) {
	errStreams := map[string]*spdystream.Stream{}
	pending := map[string]*spdystream.Stream{}
	for {
		var s *spdystream.Stream
		select {
		case s = <-streams:
		case <-done:
			return
		}
		id := s.Headers().Get("requestID")
		switch s.Headers().Get("streamType") {
		case "error":
			errStreams[id] = s
		case "data":
			pending[id] = s
		}
		if e, d := errStreams[id], pending[id]; e != nil && d != nil {
			delete(errStreams, id)
			delete(pending, id)
			go func() {
				if d.Headers().Get("port") != "80" {
					e.Write([]byte("failed to connect to localhost:" + d.Headers().Get("port") + ": connection refused"))
					e.Close()
					d.Close()
					return
				}
				io.Copy(d, d)
				d.Close()
				e.Close()
			}()
		}
	}
}

func TestPortForwardSPDYFallback(t *testing.T) {
	noLeaks(t)
	srv := spdyServer(t, protocolPortFwd, servePortForward)
	testPortForward(t, srv.URL, StreamAuto)
}

func TestPortForwardWebSocketTunnel(t *testing.T) {
	noLeaks(t)
	up := websocket.Upgrader{Subprotocols: []string{tunnelPrefix + protocolPortFwd}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		tc := &tunnelConn{ws: ws}
		defer tc.Close()
		sc, err := spdystream.NewConnection(tc, true)
		if err != nil {
			t.Error(err)
			return
		}
		streams := make(chan *spdystream.Stream, 16)
		go sc.Serve(func(s *spdystream.Stream) {
			_ = s.SendReply(http.Header{}, false)
			streams <- s
		})
		go servePortForward(sc.CloseChan(), streams)
		<-sc.CloseChan()
	}))
	t.Cleanup(srv.Close)
	testPortForward(t, srv.URL, StreamWebSocket)
}

func testPortForward(t *testing.T, url string, p StreamProtocol) {
	pods := podsFor(t, url)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var errs []error
	pf, err := PortForward(ctx, pods, "web", PortForwardOptions{Ports: []string{":80", ":81"}, Addresses: []string{"127.0.0.1"}, Protocol: p,
		OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ports := pf.Ports()
	if len(ports) != 2 || ports[0].Remote != 80 || ports[0].Local == 0 || ports[1].Remote != 81 {
		t.Fatalf("Ports: %+v", ports)
	}
	for i := range 3 {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("ping %d", i)
		c.Write([]byte(msg))
		c.(*net.TCPConn).CloseWrite()
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != msg {
			t.Fatalf("through the forward: %q, %v", b, err)
		}
	}
	// A refused port: the local connection closes, and OnError hears why.
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[1].Local))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if len(b) != 0 {
		t.Fatalf("a refused port answered %q", b)
	}
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(errs) > 0 })
	var pe *PortForwardError
	if !errors.As(errs[0], &pe) || pe.Remote != 81 || !strings.Contains(pe.Message, "connection refused") {
		t.Fatalf("OnError: %v", errs[0])
	}
	// Dial, without a listener.
	dc, err := pf.Dial(ctx, 81)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(dc); !errors.As(err, &pe) {
		t.Fatalf("reading a refused Dial: %v", err)
	}
	dc.Close()
	cancel()
	<-pf.Done()
	if !errors.Is(pf.Err(), context.Canceled) {
		t.Fatalf("Err after ctx ended: %v", pf.Err())
	}
	if _, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local)); err == nil {
		t.Fatal("still listening after the forward ended")
	}
	pf.Close()
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExecWithoutStatus: a connection that ends before the server reports
// how the command ended is an error, not a success.
func TestExecWithoutStatus(t *testing.T) {
	noLeaks(t)
	up := websocket.Upgrader{Subprotocols: []string{protocolV5}}
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.WriteMessage(websocket.BinaryMessage, []byte{channelStdout, 'x'})
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	}))
	t.Cleanup(ws.Close)
	spdy := spdyServer(t, protocolV4, func(_ <-chan bool, streams <-chan *spdystream.Stream) {
		byType := map[string]*spdystream.Stream{}
		for len(byType) < 2 {
			s := <-streams
			byType[s.Headers().Get("streamType")] = s
		}
		byType["stdout"].Write([]byte("x"))
		for _, s := range byType {
			s.Close()
		}
	})
	for _, url := range []string{ws.URL, spdy.URL} {
		var out bytes.Buffer
		err := Exec(t.Context(), podsFor(t, url), "web", ExecOptions{Command: []string{"true"}, Stdout: &out})
		if err == nil || !strings.Contains(err.Error(), "closed before the server said how the command ended") || out.String() != "x" {
			t.Errorf("%s: Exec: %v, output %q", url, err, out.String())
		}
	}
}
