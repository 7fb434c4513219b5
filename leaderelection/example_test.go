package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/leaderelection"
	"github.com/loom-k8s/loom/rest"
)

// Run one replica's campaign: the work runs only while this replica leads.
// It needs a running API server, and runs until cancelled, so it is
// compiled, not run.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	leases, err := client.For[coordinationv1.Lease](rc, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	e, err := leaderelection.New(leases, leaderelection.Options{
		Namespace: "kube-system",
		Name:      "example-controller",
		OnStartedLeading: func(ctx context.Context) {
			fmt.Println("leading")
			<-ctx.Done() // do the work until leadership ends
		},
		OnNewLeader: func(id string) { fmt.Println("leader is now", id) },
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Run(ctx); errors.Is(err, leaderelection.ErrLeadershipLost) {
		os.Exit(1) // let a fresh process campaign again
	}
}
