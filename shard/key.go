package shard

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Key returns the key by which obj, an object of kind gk, is assigned to a
// shard: "group/kind/namespace/name". An object with a controller owner
// reference takes its owner's key instead, so that a controller's
// primary object and the objects it owns land on one shard. The owner is
// taken to live in obj's namespace (a namespaced owner always does);
// cluster-scoped owners of namespaced objects are not told apart.
func Key(gk schema.GroupKind, obj metav1.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil {
			return join(gv.Group, ref.Kind, obj.GetNamespace(), ref.Name)
		}
	}
	return join(gk.Group, gk.Kind, obj.GetNamespace(), obj.GetName())
}

func join(group, kind, namespace, name string) string {
	return strings.Join([]string{group, kind, namespace, name}, "/")
}
