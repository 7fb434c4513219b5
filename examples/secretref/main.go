// Command secretref rolls a Deployment when a Secret it names changes: a
// Deployment annotated secretref.loom.dev/secret: NAME gets the hash of
// that Secret's data in its Pod template (annotation
// secretref.loom.dev/hash), so a change to the Secret starts a rollout.
//
// Secrets are read through a referenced-only cache: every Secret's
// metadata is cached, so the controller is told when any of them
// changes, but only the Secrets a Deployment names are held in full. In a
// cluster with thousands of large Secrets (Helm releases, certificates)
// that is the difference between megabytes and gigabytes.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
)

const (
	// SecretAnnotation, on a Deployment, names a Secret in its namespace.
	SecretAnnotation = "secretref.loom.dev/secret"
	// HashAnnotation, on the Deployment's Pod template, is the hash of
	// the named Secret's data.
	HashAnnotation = "secretref.loom.dev/hash"
	// bySecret indexes Deployments by the Secret they name, as
	// "namespace/name".
	bySecret = "bySecret"
)

func main() {
	if err := run(manager.SignalContext(), manager.Options{}); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, opts manager.Options) error {
	mgr, err := manager.New(opts)
	if err != nil {
		return err
	}
	if err := setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// setup adds the controller to mgr.
func setup(mgr *manager.Manager) error {
	deployments := manager.CachedClient[appsv1.Deployment](mgr)
	secrets := manager.CachedClient[corev1.Secret](mgr, cache.InformerForOptions{ReferencedOnly: true})
	if err := deployments.AddIndexer(bySecret, func(d *appsv1.Deployment) ([]string, error) {
		if name := d.Annotations[SecretAnnotation]; name != "" {
			return []string{d.Namespace + "/" + name}, nil
		}
		return nil, nil
	}); err != nil {
		return err
	}
	r := &Reconciler{Secrets: secrets, Deployments: deployments}
	controller.New(mgr, r.Reconcile, controller.Options{}).
		// Secret events carry metadata only: enough to find the
		// Deployments that name the Secret.
		Watches(secrets, func(s client.Object) []controller.Request {
			deps, _ := deployments.ByIndex(context.Background(), s.GetNamespace(), bySecret, s.GetNamespace()+"/"+s.GetName())
			reqs := make([]controller.Request, 0, len(deps))
			for _, d := range deps {
				reqs = append(reqs, controller.Request{Namespace: d.Namespace, Name: d.Name})
			}
			return reqs
		})
	return nil
}

// Reconciler stamps each Deployment's Pod template with the hash of the
// Secret it names.
type Reconciler struct {
	Secrets     client.Reader[*corev1.Secret]
	Deployments client.Writer[*appsv1.Deployment]
}

// Reconcile reads the Secret dep names (fetched on first read, then held
// until it changes) and patches the hash into dep's Pod template when it
// differs. A Deployment that names no Secret, or one that does not exist
// yet, is left alone: the Secret's creation reconciles it again.
func (r *Reconciler) Reconcile(ctx context.Context, dep *appsv1.Deployment) (controller.Result, error) {
	name := dep.Annotations[SecretAnnotation]
	if name == "" {
		return controller.Result{}, nil
	}
	secret, ok, err := client.Optional(r.Secrets.Get(ctx, dep.Namespace, name))
	if err != nil || !ok {
		return controller.Result{}, err
	}
	hash := Hash(secret)
	if dep.Spec.Template.Annotations[HashAnnotation] == hash {
		return controller.Result{}, nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{HashAnnotation: hash}}}}})
	if err != nil {
		return controller.Result{}, err
	}
	_, err = r.Deployments.Patch(ctx, dep, types.MergePatchType, patch, metav1.PatchOptions{})
	return controller.Result{}, err
}

// Hash returns the first 16 hex digits of the SHA-256 of s's data, keys
// in order.
func Hash(s *corev1.Secret) string {
	h := sha256.New()
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(s.Data[k])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
