package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientrest "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
	"github.com/loom-k8s/loom/config"
)

// Live mode: the informers sync Pods that a real kube-apiserver serves
// from etcd, as users meet it, rather than a replayed corpus. compare.sh
// with LOOM_BENCH_LIVE=1 starts the server with -env and runs each
// measurement with -kubeconfig.

// liveConfigs loads kubeconfig for Loom and for client-go.
func liveConfigs(kubeconfig string) (config.Config, *clientrest.Config, error) {
	lcfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
	if err != nil {
		return config.Config{}, nil, err
	}
	ccfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return config.Config{}, nil, err
	}
	return lcfg, ccfg, nil
}

// envMode starts a control plane, creates n Pods of the corpus's shape
// (their spec and metadata; the server sets status, uid, resourceVersion
// and managedFields), prints "kubeconfig=PATH" on standard output, and
// keeps the control plane until standard input closes.
func envMode(n, tmpls int) error {
	templates = tmpls
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
	defer cancel()
	env, cs, err := benchenv.Start(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	// The corpus's two containers both name their ports http and
	// metrics: the server warns about each Pod.
	clientrest.SetDefaultWarningHandler(clientrest.NoWarnings{})
	start := time.Now()
	made := map[string]bool{}
	for i := range n {
		if ns := podFor(i).Namespace; !made[ns] {
			made[ns] = true
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	err = benchenv.Parallel(ctx, n, func(i int) error {
		p := podFor(i)
		p.UID, p.ResourceVersion, p.ManagedFields, p.CreationTimestamp, p.Status = "", "", nil, metav1.Time{}, corev1.PodStatus{}
		_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created %d pods in %v\n", n, time.Since(start).Round(time.Millisecond))
	fmt.Printf("kubeconfig=%s\n", env.KubeconfigPath)
	benchenv.UntilStdinCloses(ctx)
	return nil
}
