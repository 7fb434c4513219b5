// Command loom is Loom's command-line tool: a local control plane for
// development (`loom dev`), and, as the other parts land, kubectl-like
// commands built on Loom's clients.
//
// Usage:
//
//	loom init --domain D --repo MODULE [--license apache2|none] [--dir DIR] [--project-name N]
//	loom create api --group G --version V --kind K [--namespaced=true] [--plural P] [--dir DIR]
//	loom create webhook --group G --version V --kind K [--dir DIR]
//	loom dev up [--nodes N] [--with-controllers] [--state-dir DIR] [--registry-port N | --registry=false]
//	loom dev down [--state-dir DIR]
//	loom dev status [--state-dir DIR] [--wait DURATION]
//	loom api-resources [-o wide|name] [--api-group G] [--namespaced=B] [--sort-by name|kind]
//	loom api-versions
//	loom get RESOURCE[,RESOURCE...] [NAME...] | RESOURCE/NAME... [-n NS | -A] [-l SELECTOR] [--field-selector S]
//	         [-o wide|yaml|json|name] [--no-headers] [--show-labels] [-w [--output-watch-events]]
//	loom get --raw PATH
//	loom logs POD [-c CONTAINER] [-f] [--tail N] [--since D] [--timestamps] [-p]
//	loom scale RESOURCE NAME --replicas N
//	loom exec POD [-c CONTAINER] [-i] [-t] [-q] -- COMMAND [ARG...]
//	loom attach POD [-c CONTAINER] [-i] [-t] [-q]
//	loom port-forward [pod/]POD [LOCAL:]REMOTE... [--address ADDR,...]
//	loom shards RING [RESOURCE...] [--lease-namespace NS] [-n NS | -A]
//	loom build image [--tag IMG] (--oci-layout DIR | --tarball FILE | --push | --dev-registry) [--platform linux/ARCH] [PACKAGE]
//	loom image inspect OCI-LAYOUT-DIR | TARBALL | IMAGE-REFERENCE
//
// Commands that talk to a cluster take kubectl's connection flags:
// --kubeconfig, --context, -n/--namespace, --cluster, --user, --server.
//
// Errors are printed as one line on stderr, with exit code 1 (2 for a usage
// error). loom exec exits with the exit code of the remote command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one `loom` subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, out, errOut io.Writer) error
}

var commands = map[string]command{
	"dev": {"run a local control plane (up, down, status, import)", runDev},
}

// errUsage marks an error in the command line; main exits with 2 for it.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var exit *exitCodeError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &exit):
		if exit.msg != "" {
			fmt.Fprintln(os.Stderr, exit.msg)
		}
		os.Exit(exit.code)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "loom:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "loom:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(out)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown command %q (see loom help)", errUsage, args[0])
	}
	return cmd.run(ctx, args[1:], out, errOut)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "loom: Kubernetes clients, caches and controllers, from scratch.\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
}

// parse parses flags that may come before, between or after positional
// arguments, as kubectl users expect (`loom get pods -n x`), and returns the
// positional arguments. "--" ends flag parsing.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %s: %v", errUsage, fs.Name(), err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stops at the first positional argument, or after "--".
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagUsage renders a flag set's defaults, for help output.
func flagUsage(fs *flag.FlagSet) string {
	var sb strings.Builder
	fs.SetOutput(&sb)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return sb.String()
}
