package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
)

func init() {
	commands["exec"] = command{"run a command in a container (as kubectl exec)", runExec}
	commands["attach"] = command{"attach to the main process of a container (as kubectl attach)", runAttach}
	commands["port-forward"] = command{"forward local ports to a pod (as kubectl port-forward)", runPortForward}
}

// exitCodeError makes loom exit with code, printing msg (when not empty)
// on stderr: exec exits with the remote command's code, as kubectl does.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }

// streamFlags are the flags exec and attach share.
type streamFlags struct {
	conn      connFlags
	container *string
	stdin     *bool
	tty       *bool
	quiet     *bool
	protocol  *string
}

func (f *streamFlags) register(fs *flag.FlagSet) {
	f.conn.register(fs)
	f.container = fs.String("container", "", "the container (default: the kubectl.kubernetes.io/default-container annotation's, or the first)")
	fs.StringVar(f.container, "c", "", "shorthand for --container")
	f.stdin = fs.Bool("stdin", false, "pass standard input to the container")
	fs.BoolVar(f.stdin, "i", false, "shorthand for --stdin")
	f.tty = fs.Bool("tty", false, "standard input is a terminal")
	fs.BoolVar(f.tty, "t", false, "shorthand for --tty")
	f.quiet = fs.Bool("quiet", false, "print only the command's output")
	fs.BoolVar(f.quiet, "q", false, "shorthand for --quiet")
	f.protocol = fs.String("protocol", "auto", "how the streams travel: auto (WebSocket, falling back to SPDY), websocket or spdy")
}

// splitStreamFlags expands the combined short flags kubectl users type
// (-it, -ti, -iq) into single ones, up to "--".
func splitStreamFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.Trim(a[1:], "itq") == "" {
			for _, c := range a[1:] {
				out = append(out, "-"+string(c))
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func parseProtocol(s string) (client.StreamProtocol, error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return client.StreamAuto, nil
	case "websocket":
		return client.StreamWebSocket, nil
	case "spdy":
		return client.StreamSPDY, nil
	}
	return 0, fmt.Errorf("%w: --protocol is auto, websocket or spdy, not %q", errUsage, s)
}

// podTarget reads the pod and picks the container, as kubectl does: the
// one named, or the annotation's default, or the first (saying so when
// there are others).
func podTarget(ctx context.Context, pods *client.Client[*corev1.Pod], name, container string, quiet bool, errOut io.Writer) (*corev1.Pod, string, error) {
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, "", fmt.Errorf("pod %s/%s does not have any containers", pod.Namespace, pod.Name)
	}
	given := container != ""
	if !given {
		container = pod.Annotations["kubectl.kubernetes.io/default-container"]
	}
	if container != "" {
		if !hasContainer(pod, container) {
			return nil, "", fmt.Errorf("container %s is not valid for pod %s out of: %s", container, pod.Name, containerNames(pod))
		}
		return pod, container, nil
	}
	container = pod.Spec.Containers[0].Name
	if !quiet && (len(pod.Spec.Containers) > 1 || len(pod.Spec.InitContainers) > 0 || len(pod.Spec.EphemeralContainers) > 0) {
		fmt.Fprintf(errOut, "Defaulted container %q out of: %s\n", container, containerNames(pod))
	}
	return pod, container, nil
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func containerNames(pod *corev1.Pod) string {
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name+" (ephem)")
	}
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name+" (init)")
	}
	return strings.Join(names, ", ")
}

// terminal puts standard input in raw mode for -t, and sends its size
// now and at each SIGWINCH. restore undoes it.
func terminal(ctx context.Context, tty bool, errOut io.Writer, quiet bool) (resize <-chan client.TerminalSize, restore func(), useTTY bool) {
	restore = func() {}
	if !tty {
		return nil, restore, false
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		if !quiet {
			fmt.Fprintln(errOut, "Unable to use a TTY - input is not a terminal or the right kind of file")
		}
		return nil, restore, false
	}
	state, err := term.MakeRaw(fd)
	if err != nil {
		fmt.Fprintln(errOut, "Unable to use a TTY:", err)
		return nil, restore, false
	}
	sizes := make(chan client.TerminalSize, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	send := func() {
		w, h, err := term.GetSize(int(os.Stdout.Fd()))
		if err != nil {
			return
		}
		select {
		case <-sizes: // an older size not yet sent
		default:
		}
		sizes <- client.TerminalSize{Width: uint16(w), Height: uint16(h)}
	}
	send()
	go func() {
		for {
			select {
			case <-winch:
				send()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return sizes, func() {
		signal.Stop(winch)
		close(done)
		_ = term.Restore(fd, state)
	}, true
}

// target finds the Pod (arg, as NAME or pod/NAME) and container that exec
// or attach (verb, for the error) work on, in the namespace the flags
// choose, and refuses a Pod that has completed.
func (f *streamFlags) target(ctx context.Context, arg, verb string, errOut io.Writer) (pods *client.Client[*corev1.Pod], name, container string, protocol client.StreamProtocol, err error) {
	name = strings.TrimPrefix(strings.TrimPrefix(arg, "pod/"), "pods/")
	if protocol, err = parseProtocol(*f.protocol); err != nil {
		return nil, "", "", protocol, err
	}
	rc, cfg, err := f.conn.client()
	if err != nil {
		return nil, "", "", protocol, err
	}
	if pods, err = client.For[corev1.Pod](rc, client.Options{}); err != nil {
		return nil, "", "", protocol, err
	}
	pods = pods.Namespace(cfg.Namespace)
	pod, container, err := podTarget(ctx, pods, name, *f.container, *f.quiet, errOut)
	if err != nil {
		return nil, "", "", protocol, err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, "", "", protocol, fmt.Errorf("cannot %s a container in a completed pod; current phase is %s", verb, pod.Status.Phase)
	}
	return pods, name, container, protocol, nil
}

// streamError turns what Exec and Attach return into loom's exit: the
// remote exit code, or an error (exit 1).
func streamError(err error) error {
	var exit *client.ExitError
	if errors.As(err, &exit) {
		return &exitCodeError{code: exit.Code, msg: exit.Error()}
	}
	return err
}

// runExec runs a command in a container: loom exec POD [-c C] [-i] [-t]
// -- COMMAND [ARG...].
func runExec(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom exec", flag.ContinueOnError)
	var f streamFlags
	f.register(fs)
	args = splitStreamFlags(args)
	var command []string
	for i, a := range args {
		if a == "--" {
			args, command = args[:i], args[i+1:]
			break
		}
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 && command == nil {
		pos, command = pos[:1], pos[1:]
	}
	if len(pos) != 1 || len(command) == 0 {
		return fmt.Errorf("%w: usage: loom exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]", errUsage)
	}
	pods, name, container, protocol, err := f.target(ctx, pos[0], "exec into", errOut)
	if err != nil {
		return err
	}
	opts := client.ExecOptions{Command: command, Container: container, Stdout: out, Stderr: errOut, Protocol: protocol}
	if *f.stdin {
		opts.Stdin = os.Stdin
		resize, restore, tty := terminal(ctx, *f.tty, errOut, *f.quiet)
		defer restore()
		opts.TTY, opts.Resize = tty, resize
	}
	// -t without -i asks for no terminal, as with kubectl.
	return streamError(client.Exec(ctx, pods, name, opts))
}

// runAttach attaches to a container's main process: loom attach POD [-c C]
// [-i] [-t].
func runAttach(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom attach", flag.ContinueOnError)
	var f streamFlags
	f.register(fs)
	pos, err := parse(fs, splitStreamFlags(args))
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: usage: loom attach POD [-c CONTAINER] [-i] [-t]", errUsage)
	}
	pods, name, container, protocol, err := f.target(ctx, pos[0], "attach", errOut)
	if err != nil {
		return err
	}
	opts := client.AttachOptions{Container: container, Stdout: out, Stderr: errOut, Protocol: protocol}
	if *f.stdin {
		opts.Stdin = os.Stdin
		resize, restore, tty := terminal(ctx, *f.tty, errOut, *f.quiet)
		defer restore()
		opts.TTY, opts.Resize = tty, resize
		if tty && !*f.quiet {
			fmt.Fprintln(errOut, "If you don't see a command prompt, try pressing enter.")
		}
	}
	return streamError(client.Attach(ctx, pods, name, opts))
}

// runPortForward forwards local ports to a pod until interrupted: loom
// port-forward [pod/]NAME [LOCAL:]REMOTE... [--address ADDR,...].
func runPortForward(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom port-forward", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	address := fs.String("address", "localhost", "local addresses to listen on, comma-separated: IP addresses or localhost (127.0.0.1 and ::1)")
	protocolFlag := fs.String("protocol", "auto", "how the streams travel: auto (WebSocket, falling back to SPDY), websocket or spdy")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return fmt.Errorf("%w: usage: loom port-forward [pod/]NAME [LOCAL:]REMOTE... [--address ADDR,...]", errUsage)
	}
	name := pos[0]
	if kind, n, ok := strings.Cut(name, "/"); ok {
		if kind != "pod" && kind != "pods" && kind != "po" {
			return fmt.Errorf("%w: loom port-forward forwards to pods only, not %s", errUsage, kind)
		}
		name = n
	}
	protocol, err := parseProtocol(*protocolFlag)
	if err != nil {
		return err
	}
	rc, cfg, err := conn.client()
	if err != nil {
		return err
	}
	pods, err := client.For[corev1.Pod](rc, client.Options{})
	if err != nil {
		return err
	}
	pods = pods.Namespace(cfg.Namespace)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("unable to forward port because pod is not running. Current status=%v", pod.Status.Phase)
	}
	ports := make([]string, 0, len(pos)-1)
	for _, p := range pos[1:] {
		p, err := namedPort(pod, p)
		if err != nil {
			return err
		}
		ports = append(ports, p)
	}
	var addrs []string
	for _, a := range strings.Split(*address, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	fwdCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	pf, err := client.PortForward(fwdCtx, pods, name, client.PortForwardOptions{
		Ports: ports, Addresses: addrs, Protocol: protocol,
		OnConnection: func(p client.ForwardedPort) { fmt.Fprintf(out, "Handling connection for %d\n", p.Local) },
		OnError:      func(err error) { fmt.Fprintln(errOut, "error:", err) },
	})
	if err != nil {
		return err
	}
	for _, p := range pf.Ports() {
		fmt.Fprintf(out, "Forwarding from %s -> %d\n", net.JoinHostPort(p.Address, strconv.Itoa(int(p.Local))), p.Remote)
	}
	<-pf.Done()
	if err := pf.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("lost connection to pod: %w", err)
	}
	return nil
}

// namedPort resolves a container port name in LOCAL:REMOTE to its number,
// as kubectl does.
func namedPort(pod *corev1.Pod, spec string) (string, error) {
	local, remote, two := strings.Cut(spec, ":")
	if !two {
		remote = local
	}
	if _, err := strconv.ParseUint(remote, 10, 16); err == nil {
		return spec, nil
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == remote {
				num := strconv.Itoa(int(p.ContainerPort))
				if !two {
					return num, nil
				}
				return local + ":" + num, nil
			}
		}
	}
	return "", fmt.Errorf("pod %s does not have a named port %q", pod.Name, remote)
}
