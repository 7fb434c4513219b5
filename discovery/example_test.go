package discovery_test

import (
	"context"
	"fmt"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
)

// exampleClient connects to the test control plane; a program would call
// config.Load(config.LoadOptions{}) to use the current kubeconfig.
func exampleClient() *rest.Client {
	cfg, err := config.Load(config.LoadOptions{Path: exampleEnv().KubeconfigPath})
	if err != nil {
		panic(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		panic(err)
	}
	return rc
}

func ExampleClient_ServerPreferredResources() {
	d := discovery.New(exampleClient(), discovery.Options{})
	lists, err := d.ServerPreferredResources(context.Background())
	if err != nil {
		fmt.Println(err) // may be a *GroupDiscoveryFailedError alongside partial results
		return
	}
	for _, l := range lists {
		for _, r := range l.APIResources {
			if r.Name == "deployments" {
				fmt.Println(l.GroupVersion, r.Name, r.Kind, r.Namespaced)
			}
		}
	}
	// Output: apps/v1 deployments Deployment true
}

func ExampleMapper_ResourceFor() {
	d := discovery.NewCached(discovery.New(exampleClient(), discovery.Options{}), discovery.CacheOptions{})
	m := discovery.NewMapper(d, discovery.MapperOptions{})
	for _, name := range []string{"deploy", "cronjob.v1.batch", "ev", "ns"} {
		mp, err := m.ResourceFor(context.Background(), name)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%-16s %-32s namespaced=%v\n", name, mp.Resource.String(), mp.Namespaced)
	}
	// Output:
	// deploy           apps/v1, Resource=deployments    namespaced=true
	// cronjob.v1.batch batch/v1, Resource=cronjobs      namespaced=true
	// ev               /v1, Resource=events             namespaced=true
	// ns               /v1, Resource=namespaces         namespaced=false
}

func ExampleCached() {
	// One discovery per six hours (the default TTL), shared by every caller;
	// Dir keeps it across runs of a short-lived program.
	d := discovery.NewCached(discovery.New(exampleClient(), discovery.Options{}), discovery.CacheOptions{
		Dir: discovery.DefaultCacheDir(exampleEnv().URL) + "-example",
	})
	defer d.Invalidate()
	groups, err := d.ServerGroups(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(groups.Groups[0].Name == "", groups.Groups[0].PreferredVersion.Version)
	// Output: true v1
}
