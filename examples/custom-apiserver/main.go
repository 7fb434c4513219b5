// Command custom-apiserver serves the API group
// restaurant.programming-kubernetes.info (Pizzas and Toppings, from
// Programming Kubernetes, chapter 8) as an aggregated API server behind
// kube-apiserver. See README.md.
//
//	custom-apiserver --kubeconfig ~/.kube/config --secure-port 8443 \
//	    --storage file:/var/lib/restaurant/state.json --cert-dir /var/run/restaurant
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/loom-k8s/loom/examples/custom-apiserver/server"
)

func main() {
	fs := flag.NewFlagSet("custom-apiserver", flag.ContinueOnError)
	var o server.Options
	var hosts string
	var reg bool
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of kube-apiserver, for delegated authentication and authorization; empty means in-cluster")
	fs.StringVar(&o.BindAddress, "bind-address", "0.0.0.0", "address to listen on")
	fs.IntVar(&o.SecurePort, "secure-port", 8443, "HTTPS port")
	fs.StringVar(&o.Storage, "storage", "memory", `"memory", or "file:PATH" to keep the objects in a file across restarts`)
	fs.StringVar(&o.CertDir, "cert-dir", "apiserver.local.config/certificates", "folder of the serving certificate (apiserver.crt, apiserver.key); a self-signed one is made if missing")
	fs.StringVar(&hosts, "serving-hosts", "", "comma-separated DNS names for the self-signed certificate, such as <service>.<namespace>.svc")
	fs.BoolVar(&reg, "register", false, "for a development cluster (loom dev up): make kube-apiserver proxy the group to this server on 127.0.0.1 (see register.go); needs --bind-address 127.0.0.1")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if hosts != "" {
		o.ServingHosts = strings.Split(hosts, ",")
	}
	if reg {
		if o.BindAddress != "127.0.0.1" {
			fmt.Fprintln(os.Stderr, "custom-apiserver: --register needs --bind-address 127.0.0.1 (kube-apiserver reaches the server there)")
			os.Exit(2)
		}
		o.ServingHosts = append(o.ServingHosts, serviceHost)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, reg); err != nil {
		fmt.Fprintln(os.Stderr, "custom-apiserver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o server.Options, reg bool) error {
	s, err := server.New(o)
	if err != nil {
		return err
	}
	if reg {
		// The certificate exists once New returns.
		if err := register(ctx, o.Kubeconfig, o.SecurePort, o.CertDir); err != nil {
			return err
		}
	}
	return s.Run(ctx)
}
