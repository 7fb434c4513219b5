package protodec

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/loom-k8s/loom/internal/intern"
	corev1 "k8s.io/api/core/v1"
)

// BenchmarkDecodeShared decodes Pods of one shape, as an informer does
// with sharing on: a table, structs shared, lookup counts kept.
func BenchmarkDecodeShared(b *testing.B) {
	const n = 1000
	data := make([][]byte, n)
	for i := range data {
		var err error
		if data[i], err = managedPod(fmt.Sprintf("pod-%d", i)).Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	o := intern.Options{Share: intern.New(), Structs: true, Stats: &intern.Stats{}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var p corev1.Pod
		if err := UnmarshalWith(data[i%n], &p, o); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkChanged measures the checks a write makes for shared parts
// changed in place, on a Pod of the shape above: on a copy (the object
// written: no part is the table's), on the cached object (every shared
// part's fingerprint is taken again), on the cached object with the copy
// alongside (ChangedIn: what every write of an object an informer caches
// does now, beside the first), and, for scale, the protobuf encoding
// every write makes anyway.
func BenchmarkChanged(b *testing.B) {
	o := intern.Options{Share: intern.New(), Structs: true}
	var pods []*corev1.Pod
	for i := range 3 {
		data, err := managedPod(fmt.Sprintf("pod-%d", i)).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		var p corev1.Pod
		if err := UnmarshalWith(data, &p, o); err != nil {
			b.Fatal(err)
		}
		pods = append(pods, &p)
	}
	cached := pods[2]
	cp := cached.DeepCopy()
	for _, bc := range []struct {
		name string
		fn   func()
	}{
		{"copy", func() { o.Share.Changed(reflect.ValueOf(cp)) }},
		{"cached", func() { o.Share.Changed(reflect.ValueOf(cached)) }},
		{"cached-in", func() { o.Share.ChangedIn(reflect.ValueOf(cached), reflect.ValueOf(cp)) }},
		{"marshal", func() { _, _ = cp.Marshal() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.fn()
			}
		})
	}
}
