package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
	"github.com/loom-k8s/loom/testenv"
)

// TestShards: loom shards lists a ring's shards from their Leases (live or
// not by their renewal) with the buckets each claims, and counts the
// objects each holds (by bucket label and the ring of the live shards)
// and those with no bucket.
func TestShards(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	ctx := t.Context()
	leases, _ := client.For[coordinationv1.Lease](rc, client.Options{})
	dur := int32(15)
	for _, l := range []struct {
		id     string
		age    time.Duration
		claims []int
	}{{"alpha", 0, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}, {"beta", time.Hour, nil}} {
		id, renewed := l.id, metav1.NewMicroTime(time.Now().Add(-l.age))
		if _, err := leases.Namespace("default").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: "web-" + id, Labels: map[string]string{shard.RingLabel: "web"},
				Annotations: map[string]string{shard.ClaimsAnnotation: shard.EncodeClaims(l.claims)},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &dur, RenewTime: &renewed},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	for i, labels := range []map[string]string{
		// alpha's: the only live shard owns every bucket
		{shard.BucketLabel("web"): "7"},
		{shard.BucketLabel("web"): "300"},
		{shard.BucketLabel("web"): "1023", "other": "y"},
		{"other": "x"},
		nil,
	} {
		if _, err := cms.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "cm-" + string(rune('a'+i)), Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"shards", "web", "configmaps", "--kubeconfig", env.KubeconfigPath, "-n", "default"}, &out, &errOut); err != nil {
		t.Fatal(err, errOut.String())
	}
	got := strings.Join(strings.Fields(out.String()), " ")
	want := regexp.MustCompile(`^SHARD LIVE RENEWED BUCKETS CONFIGMAPS alpha yes [0-9]s ago 10 3 beta no 1h0m[0-9]s ago 0 0 <unassigned> 2$`)
	if !want.MatchString(got) {
		t.Errorf("loom shards printed:\n%s\nwant the fields to match %s", out.String(), want)
	}
	out.Reset()
	if err := run(ctx, []string{"shards", "--kubeconfig", env.KubeconfigPath}, &out, &errOut); err == nil {
		t.Error("loom shards without a ring: no error")
	}
}
