// Package cluster connects Loom's examples to a cluster: the one the
// kubeconfig flags (or KUBECONFIG, or ~/.kube/config) name, or, when none
// is given, a local control plane started in-process, the same one
// `loom dev up` runs.
package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// Conn is a connection to a cluster. Close stops the local control plane,
// if one was started.
type Conn struct {
	REST      *rest.Client
	Config    config.Config
	Namespace string
	// Local is the control plane Connect started, or nil when it connected
	// to a cluster named by a kubeconfig.
	Local *testenv.Env
	Close func()
}

// Connect parses the standard kubeconfig flags from args and connects.
// localOpts says what to start when no kubeconfig exists (for example fake
// nodes for an example that needs running pods).
func Connect(ctx context.Context, name string, args []string, localOpts testenv.Options) (*Conn, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var flags config.Flags
	flags.Register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	opts := flags.LoadOptions()
	opts.InClusterFallback = false
	cfg, err := config.Load(opts)
	closeFn := func() {}
	var local *testenv.Env
	if errors.Is(err, config.ErrNoConfig) {
		fmt.Fprintln(os.Stderr, "no kubeconfig found: starting a local control plane (as `loom dev up`)")
		env, err := testenv.Start(ctx, localOpts)
		if err != nil {
			return nil, err
		}
		local = env
		closeFn = func() { _ = env.Stop() }
		if cfg, err = config.Load(config.LoadOptions{Path: env.KubeconfigPath}); err != nil {
			closeFn()
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		closeFn()
		return nil, err
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = "default"
	}
	return &Conn{REST: rc, Config: cfg, Namespace: ns, Local: local, Close: closeFn}, nil
}

// Main is an example's main: it connects (Connect with os.Args), runs run
// until it returns or Ctrl-C, closes the connection, and exits 1 with the
// error printed if run failed.
func Main(name string, localOpts testenv.Options, run func(ctx context.Context, conn *Conn) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := func() error {
		conn, err := Connect(ctx, name, os.Args[1:], localOpts)
		if err != nil {
			return err
		}
		defer conn.Close()
		return run(ctx, conn)
	}()
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
