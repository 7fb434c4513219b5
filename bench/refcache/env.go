package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
)

// envMode starts a control plane, fills it, prints "kubeconfig=PATH" on
// standard output, and keeps it until standard input closes.
func envMode() error {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
	defer cancel()
	env, cs, err := benchenv.Start(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	start := time.Now()
	if err := populate(ctx, cs); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created %d Secrets of %d bytes and %d ConfigMaps in %v\n", *secrets, *size, *namespaces, time.Since(start).Round(time.Millisecond))
	fmt.Printf("kubeconfig=%s\n", env.KubeconfigPath)
	benchenv.UntilStdinCloses(ctx)
	return nil
}

// populate creates the namespaces, the Secrets (random, incompressible
// data) and one ConfigMap per namespace naming one of its Secrets.
func populate(ctx context.Context, cs kubernetes.Interface) error {
	perNS := *secrets / *namespaces
	for i := range *namespaces {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i)}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	err := benchenv.Parallel(ctx, *secrets, func(k int) error {
		data := make([]byte, *size)
		rng := rand.New(rand.NewPCG(uint64(k), 7))
		for i := 0; i+8 <= len(data); i += 8 {
			v := rng.Uint64()
			for b := range 8 {
				data[i+b] = byte(v >> (8 * b))
			}
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName(k % perNS), Namespace: nsName(k / perNS)}, Data: map[string][]byte{"blob": data}}
		_, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return benchenv.Parallel(ctx, *namespaces, func(i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ref", Namespace: nsName(i), Labels: map[string]string{label: "1"}}, Data: map[string]string{"secret": named(i)}}
		_, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// driver makes the changes the measurements wait for, through a client of
// its own (not counted as the framework's requests).
type driver struct {
	cs *kubernetes.Clientset
}

func newDriver(kubeconfig string) (*driver, error) {
	cs, err := benchenv.Clientset(kubeconfig)
	if err != nil {
		return nil, err
	}
	return &driver{cs: cs}, nil
}

// touchConfigMaps changes an annotation of every ConfigMap.
func (d *driver) touchConfigMaps(ctx context.Context) error {
	// A value no earlier run set, so that every patch is a change.
	touch := strconv.FormatInt(time.Now().UnixNano(), 10)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{touchKey: touch}}})
	return benchenv.Parallel(ctx, *namespaces, func(i int) error {
		_, err := d.cs.CoreV1().ConfigMaps(nsName(i)).Patch(ctx, "ref", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// changeSecret patches the Secret named in namespace i with the time it
// is sent, in an annotation and a data key, and returns that stamp.
func (d *driver) changeSecret(ctx context.Context, i int) (string, error) {
	stamp := strconv.FormatInt(time.Now().UnixNano(), 10)
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{stampKey: stamp}},
		"data":     map[string][]byte{"v": []byte(stamp)},
	})
	_, err := d.cs.CoreV1().Secrets(nsName(i)).Patch(ctx, named(i), types.MergePatchType, patch, metav1.PatchOptions{})
	return stamp, err
}
