package shard_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/shard"
)

// A ConfigMap owned by a Widget goes to the Widget's shard, in every
// replica that builds the ring from the same members.
func ExampleRing() {
	ring := shard.NewRing([]string{"operator-0", "operator-1", "operator-2"}, shard.RingOptions{})
	widget := &metav1.ObjectMeta{Namespace: "team-a", Name: "w1", UID: "1"}
	config := &metav1.ObjectMeta{Namespace: "team-a", Name: "w1-config", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "example.com/v1", Kind: "Widget", Name: "w1", UID: "1", Controller: new(true)},
	}}
	w, _ := ring.Shard(shard.Key(schema.GroupKind{Group: "example.com", Kind: "Widget"}, widget))
	c, _ := ring.Shard(shard.Key(schema.GroupKind{Kind: "ConfigMap"}, config))
	fmt.Println(w == c)
	// Output: true
}
