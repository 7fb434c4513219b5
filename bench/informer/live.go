package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	clientrest "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/testenv"
)

// smallWidget is the i-th Widget of the live custom resource set: the
// corpus's Widget without its components, backup and config, and with one
// condition, about 1 KB of JSON once the server adds its metadata.
func smallWidget(i int) *Widget {
	w := widgetFor(i)
	w.Name = fmt.Sprintf("%s-%06d", w.Spec.Selector["app.kubernetes.io/name"], i) // the corpus's names may repeat
	w.Status.Endpoint = w.Name + "." + w.Namespace + ".svc:5432"
	w.UID, w.ResourceVersion, w.ManagedFields, w.CreationTimestamp, w.Generation = "", "", nil, metav1.Time{}, 0
	w.Finalizers = nil
	w.Spec.Template.Components, w.Spec.Backup, w.Spec.Config = nil, nil, nil
	w.Status.Components, w.Status.Conditions = nil, w.Status.Conditions[:1]
	return w
}

// createWidgets creates the namespaces and n small Widgets, 32 at a time,
// through the dynamic client, as a user would without generated code.
func createWidgets(ctx context.Context, kubeconfig string, n int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 1000
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := benchenv.Clientset(kubeconfig)
	if err != nil {
		return err
	}
	start := time.Now()
	made := map[string]bool{}
	for i := range n {
		if ns := smallWidget(i).Namespace; !made[ns] {
			made[ns] = true
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	err = benchenv.Parallel(ctx, n, func(i int) error {
		w := smallWidget(i)
		b, err := json.Marshal(w)
		if err != nil {
			return err
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(b); err != nil {
			return err
		}
		_, err = dc.Resource(widgetGVR).Namespace(w.Namespace).Create(ctx, &u, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created %d widgets in %v\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}

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
// and managedFields), or with kind "widgets" n small Widgets, prints
// "kubeconfig=PATH" on standard output, and keeps the control plane until
// standard input closes.
func envMode(n, tmpls int, kind string) error {
	templates = tmpls
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
	defer cancel()
	var opts testenv.Options
	if kind == "widgets" {
		opts.CRDs = []string{"testdata/widget-crd.yaml"}
	}
	env, cs, err := benchenv.StartWith(ctx, opts)
	if err != nil {
		return err
	}
	defer env.Stop()
	if kind == "widgets" {
		if err := createWidgets(ctx, env.KubeconfigPath, n); err != nil {
			return err
		}
		fmt.Printf("kubeconfig=%s\n", env.KubeconfigPath)
		benchenv.UntilStdinCloses(ctx)
		return nil
	}
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
