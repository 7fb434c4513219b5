package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
)

// connFlags are the kubeconfig flags every command that talks to a server
// takes: --kubeconfig, --context, -n/--namespace, --cluster, --user,
// --server, as kubectl.
type connFlags struct {
	config.Flags
}

func (f *connFlags) register(fs *flag.FlagSet) { f.Register(fs) }

// client builds a REST client from the flags and the kubeconfig rules. Exec
// credential plugins that may prompt (interactiveMode IfAvailable or
// Always) get the terminal the command runs in, as with kubectl.
func (f *connFlags) client() (*rest.Client, config.Config, error) {
	cfg, err := f.Load()
	if err != nil {
		return nil, cfg, err
	}
	cfg.UserAgent = "loom-cli"
	rc, err := rest.New(cfg, rest.Options{Exec: rest.ExecOptions{Stdin: os.Stdin, Stderr: os.Stderr}})
	if err != nil {
		return nil, cfg, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return rc, cfg, nil
}
