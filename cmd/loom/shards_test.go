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
// not by their renewal) and counts the objects each holds (by shard label,
// or by bucket label and the ring of the live shards), those with no shard
// and those draining.
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
		id  string
		age time.Duration
	}{{"alpha", 0}, {"beta", time.Hour}} {
		id, renewed := l.id, metav1.NewMicroTime(time.Now().Add(-l.age))
		if _, err := leases.Namespace("default").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "web-" + id, Labels: map[string]string{shard.RingLabel: "web"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &dur, RenewTime: &renewed},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	for i, labels := range []map[string]string{
		{shard.Label("web"): "alpha"},
		{shard.Label("web"): "alpha", shard.DrainLabel("web"): "1"},
		{shard.Label("web"): "beta"},
		{"other": "x"},
		{shard.BucketLabel("web"): "7"}, // alpha's: the only live shard owns every bucket
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
	want := regexp.MustCompile(`^SHARD LIVE RENEWED CONFIGMAPS alpha yes [0-9]s ago 3 beta no 1h0m[0-9]s ago 1 <unassigned> 1 <draining> 1$`)
	if !want.MatchString(got) {
		t.Errorf("loom shards printed:\n%s\nwant the fields to match %s", out.String(), want)
	}
	out.Reset()
	if err := run(ctx, []string{"shards", "--kubeconfig", env.KubeconfigPath}, &out, &errOut); err == nil {
		t.Error("loom shards without a ring: no error")
	}
}
