//go:build linux

package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/ociimage"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

const boxImage = "loom.local/box:test"

// buildBoxImage builds testdata/box into an image whose /bin/sh, echo,
// cat, upper, true and false are links to it.
func buildBoxImage(t *testing.T) v1.Image {
	t.Helper()
	src, err := os.ReadFile("testdata/box/main.go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, body := range map[string][]byte{"go.mod": []byte("module loom.local/box\n\ngo 1.21\n"), "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img, err := ociimage.Build(t.Context(), ociimage.Options{Dir: dir, Package: "."})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755}}
	for _, n := range []string{"sh", "echo", "cat", "upper", "true", "false"} {
		hdrs = append(hdrs, &tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + n, Linkname: ociimage.Entrypoint, Mode: 0o777})
	}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// startExecEnv starts a control plane with one real node, the box image
// imported, and the Pods box (containers main on 8080, side on 8081) and
// talk (upper, attachable once), Running.
func startExecEnv(t *testing.T) (*testenv.Env, *client.Client[*corev1.Pod]) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a real node")
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		skipOrFailRealNodes(t, errors.New("real nodes need Linux and root"))
	}
	if _, err := os.Stat(filepath.Join(testenv.AssetsDir(), "kubelet")); err != nil {
		skipOrFailRealNodes(t, fmt.Errorf("no kubelet in %s (make assets builds it)", testenv.AssetsDir()))
	}
	// Real-node tests of every package take turns (see testenv's
	// lockRealNodeTests).
	lock, err := os.Open(filepath.Join(testenv.AssetsDir(), "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	env, err := testenv.Start(ctx, testenv.Options{RealNodes: 1})
	var missing *testenv.MissingBinaryError
	if errors.Is(err, testenv.ErrRealNodesUnavailable) || errors.As(err, &missing) {
		skipOrFailRealNodes(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(30))
		}
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := env.ImportImage(ctx, boxImage, buildBoxImage(t)); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	pods, err := client.For[corev1.Pod](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pods = pods.Namespace("default")
	node := testenv.RealNodeName(0)
	box := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "box"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "main", Image: boxImage, ImagePullPolicy: corev1.PullNever,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "side", Image: boxImage, ImagePullPolicy: corev1.PullNever, Args: []string{"serve", "8081"}},
		}},
	}
	talk := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "talk"},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{
			{Name: "upper", Image: boxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/upper"}, Stdin: true, StdinOnce: true},
		}},
	}
	for _, p := range []*corev1.Pod{box, talk} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"box", "talk"} {
		for {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ready := p.Status.Phase == corev1.PodRunning
			for _, cs := range p.Status.ContainerStatuses {
				ready = ready && cs.Ready
			}
			if ready {
				break
			}
			select {
			case <-ctx.Done():
				out, _ := exec.Command(filepath.Join(testenv.AssetsDir(), "kubectl"), "--kubeconfig", env.KubeconfigPath, "describe", "pod", name).CombinedOutput()
				t.Fatalf("pod %s not running: %s\n%s", name, p.Status.Phase, out)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return env, pods
}

type cmdResult struct {
	stdout, stderr string
	code           int
}

func runCmd(t *testing.T, bin string, stdin string, args ...string) cmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return cmdResult{out.String(), errOut.String(), code}
}

// TestExecPortForwardLikeKubectl runs loom exec and loom port-forward
// and kubectl's on the same Pods, and compares their output and exit
// codes; loom runs each over WebSocket and again over SPDY (and exec with
// the default, which is WebSocket here).
func TestExecPortForwardLikeKubectl(t *testing.T) {
	env, pods := startExecEnv(t)
	loom := buildLoom(t)
	kubectl := filepath.Join(testenv.AssetsDir(), "kubectl")
	kc := []string{"--kubeconfig", env.KubeconfigPath}

	execCases := []struct {
		name   string
		stdin  string
		args   []string
		stderr string // what stderr must hold, for both
	}{
		{"echo", "", []string{"exec", "box", "--", "echo", "hi"}, ""},
		{"exit code", "", []string{"exec", "box", "--", "sh", "-c", "echo out; echo err >&2; exit 3"}, "err"},
		{"false", "", []string{"exec", "box", "--", "false"}, "command terminated with exit code 1"},
		{"stdin", "line one\nline two\n", []string{"exec", "-i", "box", "--", "cat"}, ""},
		{"stdin upper", "quiet\n", []string{"exec", "-i", "-n", "default", "pod/box", "-c", "side", "--", "upper"}, ""},
		{"container", "", []string{"exec", "box", "-c", "side", "--", "sh", "-c", "echo side; exit 0"}, ""},
		{"missing container", "", []string{"exec", "box", "-c", "nosuch", "--", "echo", "hi"}, "nosuch"},
		{"missing pod", "", []string{"exec", "nosuch", "--", "echo", "hi"}, "not found"},
		{"missing command", "", []string{"exec", "box", "--", "nosuchcommand"}, ""},
	}
	for _, c := range execCases {
		t.Run(c.name, func(t *testing.T) {
			want := runCmd(t, kubectl, c.stdin, append(kc, c.args...)...)
			t.Logf("kubectl %s: exit %d, stdout %q, stderr %q", strings.Join(c.args, " "), want.code, want.stdout, want.stderr)
			if c.stderr != "" && !strings.Contains(want.stderr, c.stderr) {
				t.Fatalf("kubectl's stderr lacks %q", c.stderr)
			}
			for _, protocol := range []string{"auto", "websocket", "spdy"} {
				got := runCmd(t, loom, c.stdin, loomArgs(c.args, env.KubeconfigPath, protocol)...)
				t.Logf("loom --protocol %s: exit %d, stdout %q, stderr %q", protocol, got.code, got.stdout, got.stderr)
				if got.code != want.code || got.stdout != want.stdout {
					t.Errorf("loom --protocol %s: exit %d, stdout %q; kubectl: exit %d, stdout %q", protocol, got.code, got.stdout, want.code, want.stdout)
				}
				if c.stderr != "" && !strings.Contains(got.stderr, c.stderr) {
					t.Errorf("loom --protocol %s: stderr %q lacks %q", protocol, got.stderr, c.stderr)
				}
			}
		})
	}

	pfCases := []struct {
		name string
		args []string
		path string
	}{
		{"free local port", []string{"port-forward", "box", ":8080"}, "/a"},
		{"pod/ and named port", []string{"port-forward", "pod/box", ":http"}, "/b"},
		{"second container's port", []string{"port-forward", "box", ":8081", "--address", "127.0.0.1"}, "/c"},
	}
	for _, c := range pfCases {
		t.Run(c.name, func(t *testing.T) {
			want := portForwardGet(t, kubectl, append(kc, c.args...), c.path)
			for _, protocol := range []string{"websocket", "spdy"} {
				got := portForwardGet(t, loom, loomArgs(c.args, env.KubeconfigPath, protocol), c.path)
				t.Logf("loom --protocol %s: %q; kubectl: %q", protocol, got, want)
				if got != want {
					t.Errorf("loom --protocol %s: GET %s answered %q; kubectl's %q", protocol, c.path, got, want)
				}
			}
		})
	}

	t.Run("port-forward to a closed port", func(t *testing.T) {
		for bin, args := range map[string][]string{
			kubectl: append(kc, "port-forward", "box", ":9999"),
			loom:    loomArgs([]string{"port-forward", "box", ":9999"}, env.KubeconfigPath, "auto"),
		} {
			body := portForwardGet(t, bin, args, "/")
			if !strings.HasPrefix(body, "error:") {
				t.Errorf("%s: GET through a forward to a closed port: %q, want an error", filepath.Base(bin), body)
			}
		}
	})

	t.Run("attach", func(t *testing.T) {
		// talk reads one line, and exits when its standard input closes
		// (stdinOnce): the end of loom's standard input closes it.
		got := runCmd(t, loom, "attached\n", loomArgs([]string{"attach", "-i", "talk"}, env.KubeconfigPath, "websocket")...)
		if got.code != 0 || got.stdout != "ATTACHED\n" {
			t.Fatalf("loom attach -i talk: exit %d, stdout %q, stderr %q", got.code, got.stdout, got.stderr)
		}
	})

	t.Run("tty", func(t *testing.T) {
		// loom exec -it on a pseudo-terminal: raw mode, the remote
		// terminal's echo, and ^D ending the remote command's input.
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		defer tty.Close()
		cmd := exec.CommandContext(t.Context(), loom, loomArgs([]string{"exec", "-it", "box", "-c", "side", "--", "sh", "-c", "echo ready; upper"}, env.KubeconfigPath, "websocket")...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		var screen syncWriter
		go io.Copy(&screen, ptmx)
		waitScreen := func(s string) {
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(screen.String(), s) {
				if time.Now().After(deadline) {
					t.Fatalf("the terminal shows %q, without %q", screen.String(), s)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		waitScreen("ready")
		ptmx.WriteString("hello\r")
		waitScreen("HELLO")
		ptmx.WriteString("\x04")
		if err := <-exited; err != nil {
			t.Fatalf("loom exec -it: %v; the terminal shows %q", err, screen.String())
		}
		exited <- nil
		t.Logf("the terminal showed %q", screen.String())
	})

	t.Run("client errors", func(t *testing.T) {
		ctx := t.Context()
		for _, p := range []client.StreamProtocol{client.StreamWebSocket, client.StreamSPDY} {
			err := client.Exec(ctx, pods, "box", client.ExecOptions{Command: []string{"sh", "-c", "exit 4"}, Container: "main", Protocol: p})
			var exit *client.ExitError
			if !errors.As(err, &exit) || exit.Code != 4 {
				t.Errorf("%v: exit 4: %v", p, err)
			}
			err = client.Exec(ctx, pods, "box", client.ExecOptions{Command: []string{"true"}, Container: "nosuch", Protocol: p})
			var cnf *client.ContainerNotFoundError
			if !errors.As(err, &cnf) || !apierrors.IsBadRequest(err) {
				t.Errorf("%v: a missing container: %v", p, err)
			}
			err = client.Exec(ctx, pods, "nosuch", client.ExecOptions{Command: []string{"true"}, Protocol: p})
			if !apierrors.IsNotFound(err) {
				t.Errorf("%v: a missing pod: %v", p, err)
			}
			// A command waiting on its standard input: Exec returns when
			// ctx ends.
			cctx, cancel := context.WithCancel(ctx)
			pr, pw := io.Pipe()
			var out syncWriter
			done := make(chan error, 1)
			go func() {
				done <- client.Exec(cctx, pods, "box", client.ExecOptions{Command: []string{"cat"}, Container: "main", Stdin: pr, Stdout: &out, Protocol: p})
			}()
			fmt.Fprintln(pw, "waiting")
			for !strings.Contains(out.String(), "waiting") {
				select {
				case err := <-done:
					t.Fatalf("%v: Exec ended before ctx: %v", p, err)
				case <-time.After(10 * time.Millisecond):
				}
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("%v: Exec after ctx ended: %v", p, err)
			}
			pw.Close()
		}
	})

	t.Run("client.Dial", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		pf, err := client.PortForward(ctx, pods, "box", client.PortForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		c, err := pf.Dial(ctx, 8081)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, "GET /dial HTTP/1.0\r\n\r\n")
		b, err := io.ReadAll(c)
		if err != nil || !strings.HasSuffix(string(b), "hello from box on port 8081, path /dial\n") {
			t.Fatalf("GET /dial: %q, %v", b, err)
		}
	})
}

// loomArgs puts the kubeconfig and protocol flags after loom's
// subcommand, where loom takes them.
func loomArgs(args []string, kubeconfig, protocol string) []string {
	return append([]string{args[0], "--kubeconfig", kubeconfig, "--protocol", protocol}, args[1:]...)
}

// syncWriter collects output written from another goroutine.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

var forwardingRE = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> \d+`)

// portForwardGet starts bin port-forward args, GETs path through the
// first forwarded port, stops it, and returns the body, or "error: ..."
// when the request failed.
func portForwardGet(t *testing.T, bin string, args []string, path string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(stop)
	port := ""
	deadline := time.After(2 * time.Minute)
	for port == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				stop()
				t.Fatalf("%s %v ended before forwarding: %s", bin, args, errOut.String())
			}
			if m := forwardingRE.FindStringSubmatch(l); m != nil {
				port = m[1]
			}
		case <-deadline:
			t.Fatalf("%s %v: no Forwarding line", bin, args)
		}
	}
	go func() {
		for range lines {
		}
	}()
	hc := &http.Client{Timeout: time.Minute}
	resp, err := hc.Get("http://127.0.0.1:" + port + path)
	body := ""
	if err != nil {
		body = "error: " + err.Error()
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	stop()
	t.Logf("%s %s: %q (stderr %q)", filepath.Base(bin), strings.Join(args, " "), body, errOut.String())
	return body
}
