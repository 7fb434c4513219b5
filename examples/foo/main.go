// Command foo runs the Foo operator, the Loom version of Kubernetes'
// sample-controller: a Foo (samplecontroller.k8s.io/v1alpha1) asks for a
// Deployment of a given name and number of replicas, which the operator
// creates, owns and keeps at that size, reporting its available replicas
// in the Foo's status. `kubectl scale foo NAME --replicas N` scales it.
//
// Usage:
//
//	foo [--kubeconfig F] [--context C] [--watch-namespace NS] [--install-crds]
//	    [--leader-elect | --shard-ring NAME [--shard-identity ID]]
//	    [--health-addr :8081] [--metrics-addr :8443] [-v]
//	    [--trace-endpoint HOST:PORT [--trace-annotations]]
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
	"time"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	fooconfig "github.com/loom-k8s/loom/examples/foo/config"
	"github.com/loom-k8s/loom/examples/foo/operator"
	"github.com/loom-k8s/loom/examples/internal/otlp"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/tracing"
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
		fmt.Fprintln(os.Stderr, "foo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, errOut io.Writer) error {
	fs := flag.NewFlagSet("foo", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var conn config.Flags
	conn.Register(fs)
	ns := fs.String("watch-namespace", "", "only handle Foo objects and Deployments in this namespace (default: all)")
	install := fs.Bool("install-crds", false, "install (or update) the Foo CRD at start and wait until it is established")
	elect := fs.Bool("leader-elect", false, "campaign for the Lease foo-system/foo-operator before running, so replicas take over from each other")
	ring := fs.String("shard-ring", "", "run as one replica of this sharded ring (Leases in foo-system): the replicas split the Foos among them")
	identity := fs.String("shard-identity", "", "with --shard-ring: this replica's name in the ring (default: host name and a random suffix)")
	health := fs.String("health-addr", "", "serve /healthz and /readyz here, such as :8081")
	metrics := fs.String("metrics-addr", "", "serve /metrics here over HTTPS, to callers the API server lets get /metrics, such as :8443")
	verbose := fs.Bool("v", false, "log every reconcile")
	traceTo := fs.String("trace-endpoint", "", "send OpenTelemetry traces over OTLP/gRPC (plain) to this collector, such as localhost:4317")
	annotate := fs.Bool("trace-annotations", false, "with --trace-endpoint: stamp the Deployments a reconcile writes with its trace (annotation loom.dev/traceparent), so the next controller can continue it")
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
	log := logger(errOut, *verbose)
	if *install {
		if err := installCRDs(ctx, cfg, log); err != nil {
			return err
		}
	}
	opts := operator.Options{Namespace: *ns, HealthAddr: *health, MetricsAddr: *metrics, Logger: log}
	if *traceTo != "" {
		tp, err := otlp.Provider(ctx, *traceTo, "foo-operator")
		if err != nil {
			return err
		}
		defer otlp.Shutdown(tp)
		opts.Tracing = tracing.Options{Provider: tp, Annotate: *annotate}
	}
	opts.Ring, opts.Identity = *ring, *identity
	if *elect {
		opts.LeaderElection = manager.LeaderElection{Enabled: true, Namespace: "foo-system", Name: "foo-operator"}
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

func installCRDs(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		return err
	}
	defer rc.CloseIdleConnections()
	crds, err := crd.Read(fooconfig.CRDs, "crd/*.yaml")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return crd.Install(ctx, rc, crds, crd.Options{FieldManager: "foo-operator", Logger: log})
}
