// Command at runs the At operator (Programming Kubernetes' "cnat"): an At
// object runs a command once, at a scheduled time, in a Pod it owns.
//
// Usage:
//
//	at [--kubeconfig F] [--context C] [--watch-namespace NS] [--install-crds]
//	   [--leader-elect] [--health-addr :8081] [--metrics-addr :8443]
//	   [--webhooks [--webhook-addr :9443] [--cert-dir D] [--webhook-local | --webhook-url U]] [-v]
//	at demo [--kubeconfig F] [--in 5s] [--command "echo hello"]
//
// Without a kubeconfig (no --kubeconfig, no $KUBECONFIG, no ~/.kube/config)
// it uses the in-cluster service account, as in the Deployment under
// config/manager. `at demo` is the client half of `make demo`: with the
// operator running (make demo starts it in its own process with
// --install-crds --webhooks --webhook-local), it creates an At due a few
// seconds later, prints its phase changes as they happen, and exits once it
// is DONE.
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

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	atconfig "github.com/loom-k8s/loom/examples/at/config"
	"github.com/loom-k8s/loom/examples/at/operator"
	"github.com/loom-k8s/loom/examples/internal/otlp"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/tracing"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// /metrics (--metrics-addr) is served over HTTPS to callers that the API
// server authenticates and authorizes (get on the non-resource URL
// /metrics), which takes these:
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "at:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) > 0 && args[0] == "demo" {
		err := runDemo(ctx, args[1:], out, errOut)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil // interrupted
		}
		return err
	}
	fs := flag.NewFlagSet("at", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var conn config.Flags
	conn.Register(fs)
	ns := fs.String("watch-namespace", "", "only handle At objects in this namespace (default: all)")
	install := fs.Bool("install-crds", false, "install (or update) the At CRD at start and wait until it is established (with --webhooks, the webhook configurations too)")
	elect := fs.Bool("leader-elect", false, "campaign for the Lease at-system/at-operator before running, so replicas take over from each other")
	health := fs.String("health-addr", "", "serve /healthz and /readyz here, such as :8081")
	metrics := fs.String("metrics-addr", "", "serve /metrics here over HTTPS, to callers the API server lets get /metrics, such as :8443")
	hooks := fs.Bool("webhooks", false, "serve the validating, defaulting and conversion webhooks, with self-made certificates injected into config/'s webhook configurations and the CRD")
	hookAddr := fs.String("webhook-addr", ":9443", "where the webhook server listens")
	certDir := fs.String("cert-dir", "", "where the webhook certificates are kept (default $TMPDIR/at-webhook-certs)")
	hookLocal := fs.Bool("webhook-local", false, "point the webhooks at https://<webhook-addr> instead of the Service, for an API server that reaches this process directly (local runs; one replica)")
	hookURL := fs.String("webhook-url", "", "point the webhooks at this base URL instead of the Service, such as a proxy in front of several replicas (https://host:port)")
	caDelay := fs.Duration("ca-propagation-delay", time.Minute, "how long a new CA bundle is given to reach the API server before the new CA signs, and a new signer to reach every replica before the old CA leaves the bundle")
	verbose := fs.Bool("v", false, "log every reconcile")
	traceTo := fs.String("trace-endpoint", "", "send OpenTelemetry traces over OTLP/gRPC (plain) to this collector, such as localhost:4317")
	annotate := fs.Bool("trace-annotations", false, "with --trace-endpoint: continue the trace stamped on an At by its writer (annotation loom.dev/traceparent), and stamp what a reconcile writes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load(conn)
	if err != nil {
		return err
	}
	log := logger(errOut, *verbose)
	if *install {
		if err := installCRDs(ctx, cfg, log, *hooks); err != nil {
			return err
		}
	}
	opts := operator.Options{Namespace: *ns, HealthAddr: *health, MetricsAddr: *metrics, Logger: log}
	if *traceTo != "" {
		tp, err := otlp.Provider(ctx, *traceTo, "at-operator")
		if err != nil {
			return err
		}
		defer otlp.Shutdown(tp)
		opts.Tracing = tracing.Options{Provider: tp, Annotate: *annotate}
	}
	if *hooks {
		opts.Webhooks = &operator.WebhookOptions{Addr: *hookAddr, CertDir: *certDir, LocalURL: *hookLocal, URL: *hookURL, PropagationDelay: *caDelay}
	}
	if *elect {
		opts.LeaderElection = manager.LeaderElection{Enabled: true, Namespace: "at-system", Name: "at-operator"}
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

// installCRDs installs the embedded CRD. With webhooks, its versions
// convert through the operator's webhook, and the webhook configurations
// are installed too.
func installCRDs(ctx context.Context, cfg config.Config, log *slog.Logger, webhooks bool) error {
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		return err
	}
	defer rc.CloseIdleConnections()
	crds, err := crd.Read(atconfig.CRDs, "crd/*.yaml")
	if err != nil {
		return err
	}
	if webhooks {
		live, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: crd.Resource()})
		if err != nil {
			return err
		}
		for i := range crds {
			crds[i] = operator.WithConversionWebhook(crds[i])
			// Keep a conversion stanza already there: the Injector may have
			// pointed it at a URL, and applying the Service form again
			// would leave both, which the API server refuses.
			cur, ok, err := client.Optional(live.Get(ctx, crds[i].GetName(), metav1.GetOptions{}))
			if err != nil {
				return err
			}
			if conv, found, _ := unstructured.NestedMap(curObject(cur, ok), "spec", "conversion"); found && conv["strategy"] == "Webhook" {
				_ = unstructured.SetNestedMap(crds[i].Object, conv, "spec", "conversion")
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := crd.Install(ctx, rc, crds, crd.Options{FieldManager: "at-operator", Logger: log}); err != nil {
		return err
	}
	if !webhooks {
		return nil
	}
	configs, err := atconfig.WebhookConfigurations()
	if err != nil {
		return err
	}
	mapper := discovery.MapperFor(rc)
	for _, obj := range configs {
		gvk := obj.GroupVersionKind()
		res, err := mapper.RESTMapping(ctx, gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		c, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: res})
		if err != nil {
			return err
		}
		// Created once, never re-applied: the Injector owns the clientConfig
		// afterwards (a URL instead of the Service, for local runs).
		_, err = c.Create(ctx, obj, metav1.CreateOptions{FieldManager: "at-operator"})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			return fmt.Errorf("at: installing %s %s: %w", gvk.Kind, obj.GetName(), err)
		default:
			log.Info("created webhook configuration", "kind", gvk.Kind, "name", obj.GetName())
		}
	}
	return nil
}

func curObject(u *unstructured.Unstructured, ok bool) map[string]any {
	if !ok || u == nil {
		return nil
	}
	return u.Object
}
