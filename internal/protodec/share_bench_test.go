package protodec

import (
	"fmt"
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
