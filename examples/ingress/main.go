// Command ingress runs the Ingress manager operator: a Service with the
// annotation ingress/http: "true" gets an Ingress of the same name, owned
// by the Service, routing "/" to its first port. The annotations
// ingress/host and ingress/class set the rule's host and the class.
//
// Usage:
//
//	ingress [--kubeconfig F] [--context C] [--watch-namespace NS]
//	        [--leader-elect] [--health-addr :8081] [--metrics-addr :8443] [-v]
//
// Without a kubeconfig (no --kubeconfig, no $KUBECONFIG, no ~/.kube/config)
// it uses the in-cluster service account, as in the Deployment under
// config/manager.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/examples/ingress/operator"
	"github.com/loom-k8s/loom/manager"
)

// /metrics (--metrics-addr) is served over HTTPS to callers that the API
// server authenticates and authorizes (get on the non-resource URL
// /metrics), which takes these:
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "ingress:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, errOut io.Writer) error {
	fs := flag.NewFlagSet("ingress", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var conn config.Flags
	conn.Register(fs)
	ns := fs.String("watch-namespace", "", "only handle Services in this namespace (default: all)")
	elect := fs.Bool("leader-elect", false, "campaign for the Lease ingress-system/ingress-operator before running, so replicas take over from each other")
	health := fs.String("health-addr", "", "serve /healthz and /readyz here, such as :8081")
	metrics := fs.String("metrics-addr", "", "serve /metrics here over HTTPS, to callers the API server lets get /metrics, such as :8443")
	verbose := fs.Bool("v", false, "log every reconcile")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg, err := load(conn)
	if err != nil {
		return err
	}
	opts := operator.Options{Namespace: *ns, HealthAddr: *health, MetricsAddr: *metrics, Logger: logger(errOut, *verbose)}
	if *elect {
		opts.LeaderElection = manager.LeaderElection{Enabled: true, Namespace: "ingress-system", Name: "ingress-operator"}
	}
	err = operator.Run(ctx, cfg, opts)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil // interrupted
	}
	return err
}

// load reads the kubeconfig as kubectl does, falling back to the in-cluster
// service account.
func load(conn config.Flags) (config.Config, error) {
	lo := conn.LoadOptions()
	lo.InClusterFallback = true
	return config.Load(lo)
}

func logger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
