// Command discovery shows the discovery client and the RESTMapper: the
// server's version, its group versions, and how kubectl-style names map to
// resources.
//
//	go run ./examples/discovery [--kubeconfig FILE]
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/internal/cluster"
	"github.com/loom-k8s/loom/testenv"
)

func main() { cluster.Main("discovery", testenv.Options{}, run) }

func run(ctx context.Context, conn *cluster.Conn) error {

	d := discovery.New(conn.REST, discovery.Options{})
	v, err := d.ServerVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Println("server version:", v.GitVersion)

	cached := discovery.NewCached(d, discovery.CacheOptions{})
	snap, err := cached.Discover(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%d group versions (aggregated discovery: %v)\n", len(snap.GroupVersions()), snap.Aggregated)
	lists, err := cached.ServerPreferredResources(ctx)
	var partial *discovery.GroupDiscoveryFailedError
	if errors.As(err, &partial) {
		fmt.Println("some groups could not be discovered:", err)
	} else if err != nil {
		return err
	}
	n := 0
	for _, l := range lists {
		n += len(l.APIResources)
	}
	fmt.Printf("%d resources at their preferred versions\n", n)

	m := discovery.NewMapper(cached, discovery.MapperOptions{})
	for _, name := range []string{"po", "deploy", "cronjobs.v1.batch", "hpa", "ev"} {
		mp, err := m.ResourceFor(ctx, name)
		if err != nil {
			return err
		}
		fmt.Printf("%-18s -> %-40s kind %s\n", name, mp.Resource.GroupResource().String()+" "+mp.Resource.Version, mp.Kind.Kind)
	}
	return nil
}
