package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExecOptions configure [Exec]. The zero value is not enough on its own:
// Command is required.
type ExecOptions struct {
	// Command is the program to run in the container and its arguments,
	// not run through a shell. Required.
	Command []string
	// Container names the container. Default: the Pod's only container;
	// a Pod with several refuses the call without one.
	Container string
	// Stdin is copied to the command's standard input; at its end the
	// command's standard input is closed (except over the older
	// v4.channel.k8s.io protocol, which cannot say so). Default: nil, the
	// command gets no standard input.
	Stdin io.Reader
	// Stdout receives the command's standard output. Default: nil, it is
	// not asked for (or, when Stdin and Stderr are nil too, dropped: the
	// server needs one stream).
	Stdout io.Writer
	// Stderr receives the command's standard error. Default: nil, it is
	// not asked for. With TTY, the terminal's output all goes to Stdout.
	Stderr io.Writer
	// TTY runs the command on a terminal. Default: false.
	TTY bool
	// Resize sends the terminal's size to the container each time one
	// arrives, with TTY; send the first size at once. Closing it stops
	// resizes. Default: nil, the size is left as the runtime sets it.
	Resize <-chan TerminalSize
	// Protocol chooses WebSocket or SPDY. Default: StreamAuto, WebSocket
	// with SPDY as the fallback.
	Protocol StreamProtocol
}

// AttachOptions configure [Attach]. The zero value is valid: it attaches
// to the only container and asks for none of its streams.
type AttachOptions struct {
	// Container names the container. Default: the Pod's only container;
	// a Pod with several refuses the call without one.
	Container string
	// Stdin is copied to the container's standard input, which the
	// container must keep open (stdin: true in its spec). Default: nil.
	Stdin io.Reader
	// Stdout receives the container's standard output. Default: nil.
	Stdout io.Writer
	// Stderr receives the container's standard error. Default: nil.
	Stderr io.Writer
	// TTY attaches to the container's terminal (tty: true in its spec).
	// Default: false.
	TTY bool
	// Resize sends the terminal's size, as in ExecOptions. Default: nil.
	Resize <-chan TerminalSize
	// Protocol chooses WebSocket or SPDY. Default: StreamAuto.
	Protocol StreamProtocol
}

// TerminalSize is the size of a terminal in characters.
type TerminalSize struct {
	Width  uint16
	Height uint16
}

// ExitError is returned by [Exec] when the command ran and exited with a
// code other than 0. Its message is the one kubectl prints.
type ExitError struct {
	// Code is the command's exit code.
	Code int
	// Status is what the server reported.
	Status metav1.Status
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("command terminated with exit code %d", e.Code)
}

// ExitCode returns e.Code.
func (e *ExitError) ExitCode() int { return e.Code }

// StatusError is returned by [Exec] and [Attach] when the server reports
// on the error channel that the command failed without an exit code: it
// could not be started (no such file), or the stream broke.
type StatusError struct {
	Status metav1.Status
}

func (e *StatusError) Error() string {
	msg := e.Status.Message
	if msg == "" {
		msg = string(e.Status.Reason)
	}
	return "client: " + msg
}

// Exec runs a command in a container of the named Pod, as kubectl exec
// does, and copies its streams until it exits. It returns nil when the
// command exits with 0, an [*ExitError] with its exit code otherwise, an
// [*UpgradeError] when the server refuses (a missing Pod is
// apierrors.IsNotFound), a [*ContainerNotFoundError] when the Pod has no
// such container, an error saying so when the connection closes before
// the server reports how the command ended, and ctx's error when ctx ends
// first, which closes the connection (the command itself may go on
// running in the container).
//
// Exec returns once the output is written, without waiting for a read of
// opts.Stdin that is still blocked.
func Exec(ctx context.Context, pods *Client[*corev1.Pod], name string, opts ExecOptions) error {
	if len(opts.Command) == 0 {
		return fmt.Errorf("client: exec in pod %q: no command", name)
	}
	return stream(ctx, pods, name, "exec", streamOptions{
		command: opts.Command, container: opts.Container, stdin: opts.Stdin, stdout: opts.Stdout, stderr: opts.Stderr,
		tty: opts.TTY, resize: opts.Resize, protocol: opts.Protocol,
	})
}

// Attach attaches to the main process of a container of the named Pod, as
// kubectl attach does, and copies its streams until it exits or ctx ends
// (detaching; the process goes on). Its errors are those of [Exec]; a
// process that exits with a code other than 0 is an [*ExitError].
func Attach(ctx context.Context, pods *Client[*corev1.Pod], name string, opts AttachOptions) error {
	return stream(ctx, pods, name, "attach", streamOptions{
		container: opts.Container, stdin: opts.Stdin, stdout: opts.Stdout, stderr: opts.Stderr,
		tty: opts.TTY, resize: opts.Resize, protocol: opts.Protocol,
	})
}

type streamOptions struct {
	command        []string
	container      string
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
	resize         <-chan TerminalSize
	protocol       StreamProtocol
}

func stream(ctx context.Context, pods *Client[*corev1.Pod], name, op string, o streamOptions) error {
	res, ns, err := pods.named(ctx, op, name)
	if err != nil {
		return err
	}
	if o.tty {
		// One stream: a terminal merges standard error into its output.
		o.stderr = nil
	}
	if o.stdin == nil && o.stdout == nil && o.stderr == nil {
		// The server wants at least one stream.
		o.stdout = io.Discard
	}
	r := pods.req(pods.rc.Get(), res, ns, asObject).Name(name).SubResource(op)
	for _, c := range o.command {
		r = r.Param("command", c)
	}
	if o.container != "" {
		r = r.Param("container", o.container)
	}
	for _, p := range []struct {
		name string
		on   bool
	}{{"stdin", o.stdin != nil}, {"stdout", o.stdout != nil}, {"stderr", o.stderr != nil}, {"tty", o.tty}} {
		if p.on {
			r = r.Param(p.name, "true")
		}
	}
	t := &streamTarget{op: op, namespace: ns, pod: name, rc: pods.rc, url: r.URL()}
	err = t.stream(ctx, o)
	var ue *UpgradeError
	if o.container != "" && errors.As(err, &ue) && ue.StatusCode == 400 {
		// Name the missing container when that is what the server
		// refused.
		if pod, gerr := pods.Namespace(ns).Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			var names []string
			for _, c := range pod.Spec.Containers {
				names = append(names, c.Name)
			}
			for _, c := range pod.Spec.InitContainers {
				names = append(names, c.Name)
			}
			for _, c := range pod.Spec.EphemeralContainers {
				names = append(names, c.Name)
			}
			if !contains(names, o.container) {
				return &ContainerNotFoundError{Namespace: ns, Pod: name, Container: o.container, Containers: names, Err: err}
			}
		}
	}
	return err
}

// stream runs the streams over WebSocket, or SPDY.
func (t *streamTarget) stream(ctx context.Context, o streamOptions) error {
	if o.protocol != StreamSPDY {
		ws, err := t.dialWebSocket(ctx, []string{protocolV5, protocolV4})
		if err == nil {
			return t.streamWebSocket(ctx, ws, o)
		}
		var ue *UpgradeError
		if o.protocol == StreamWebSocket || !errors.As(err, &ue) || !ue.fallback() {
			return err
		}
	}
	conn, _, err := t.dialSPDY(ctx, "POST", []string{protocolV5, protocolV4})
	if err != nil {
		return err
	}
	return t.streamSPDY(ctx, conn, o)
}

// statusError turns what the server wrote on the error channel into the
// error Exec returns: nil for success (or nothing written), an
// [*ExitError] for a non-zero exit code, a [*StatusError] otherwise.
func statusError(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("client: the error channel holds no Status: %w (%q)", err, truncate(data, 200))
	}
	if st.Status == metav1.StatusSuccess {
		return nil
	}
	if st.Reason == "NonZeroExitCode" && st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type != "ExitCode" {
				continue
			}
			code, err := strconv.Atoi(c.Message)
			if err != nil {
				return fmt.Errorf("client: the server reported exit code %q: %w", c.Message, err)
			}
			return &ExitError{Code: code, Status: st}
		}
	}
	return &StatusError{Status: st}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// resizeJSON is how a terminal size travels on the resize stream.
func resizeJSON(s TerminalSize) []byte {
	b, _ := json.Marshal(struct{ Width, Height uint16 }{s.Width, s.Height})
	return b
}
