package crd_test

import (
	"context"
	"embed"
	"log"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/rest"
)

// manifests stands for the CRD manifests controller-gen wrote, which an
// operator embeds:
//
//	//go:embed config/crd/*.yaml
var manifests embed.FS

// An operator embeds the CRD manifests controller-gen wrote (a variable of
// type embed.FS with the directive //go:embed config/crd/*.yaml), and
// installs them at start. It needs a running API server, so it is compiled, not run.
func ExampleInstall() {
	ctx := context.Background()
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	crds, err := crd.Read(manifests, "config/crd/*.yaml")
	if err != nil {
		log.Fatal(err) // a *crd.ReadError names the file and document
	}
	if err := crd.Install(ctx, rc, crds, crd.Options{FieldManager: "my-operator"}); err != nil {
		log.Fatal(err) // a *crd.NotEstablishedError names the condition
	}
}

// Uninstall removes CRDs, and with them every custom resource they held.
// It needs a running API server, so it is compiled, not run.
func ExampleUninstall() {
	ctx := context.Background()
	var rc *rest.Client // from rest.New
	crds, err := crd.ReadFiles("config/crd")
	if err != nil {
		log.Fatal(err)
	}
	if err := crd.Uninstall(ctx, rc, crds, crd.Options{}); err != nil {
		log.Fatal(err)
	}
}

// WaitEstablished waits for CRDs installed by someone else, such as a Helm
// chart. It needs a running API server, so it is compiled, not run.
func ExampleWaitEstablished() {
	ctx := context.Background()
	var rc *rest.Client // from rest.New
	if err := crd.WaitEstablished(ctx, rc, crd.Options{}, "ats.cnat.programming-kubernetes.info"); err != nil {
		log.Fatal(err)
	}
}
