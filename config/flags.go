package config

import "flag"

// Flags holds the standard kubeconfig flags. Register them on a flag set
// with [Flags.Register], parse, then call [Flags.Load].
//
// The zero value is ready to use and means "no flags given".
type Flags struct {
	// Kubeconfig is --kubeconfig: an explicit kubeconfig file.
	Kubeconfig string
	// Context is --context.
	Context string
	// Namespace is --namespace (short: -n).
	Namespace string
	// Cluster is --cluster.
	Cluster string
	// User is --user.
	User string
	// Server is --server.
	Server string
}

// Register defines --kubeconfig, --context, --namespace, -n, --cluster,
// --user and --server on fs, bound to f's fields.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig, "path to a kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
	fs.StringVar(&f.Context, "context", f.Context, "kubeconfig context to use")
	fs.StringVar(&f.Namespace, "namespace", f.Namespace, "namespace (default: the context's namespace)")
	fs.StringVar(&f.Namespace, "n", f.Namespace, "shorthand for --namespace")
	fs.StringVar(&f.Cluster, "cluster", f.Cluster, "kubeconfig cluster to use")
	fs.StringVar(&f.User, "user", f.User, "kubeconfig user to use")
	fs.StringVar(&f.Server, "server", f.Server, "API server URL")
}

// LoadOptions returns the [LoadOptions] the flags describe, with the
// in-cluster fallback turned on.
func (f *Flags) LoadOptions() LoadOptions {
	return LoadOptions{
		Path: f.Kubeconfig,
		Overrides: Overrides{
			Context:   f.Context,
			Cluster:   f.Cluster,
			User:      f.User,
			Namespace: f.Namespace,
			Server:    f.Server,
		},
		InClusterFallback: true,
	}
}

// Load resolves the configuration the flags describe: the kubeconfig rules
// of [Load], falling back to [InCluster] when no kubeconfig exists.
func (f *Flags) Load() (Config, error) {
	return Load(f.LoadOptions())
}
