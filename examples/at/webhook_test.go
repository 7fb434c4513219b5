package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/at/api/v1beta1"
	"github.com/loom-k8s/loom/examples/at/operator"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
)

// TestAtWebhooks runs the operator's webhooks behind a real kube-apiserver:
// objects written in one version read back in the other with no loss, the
// validating webhook's message reaches kubectl, and the defaulting webhook
// fills in the command, in either version.
func TestAtWebhooks(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := t.Context()
	admin, rc := install(t, env)
	e2e.Run(t, func(ctx context.Context) error {
		return operator.Run(ctx, admin, operator.Options{
			Webhooks: &operator.WebhookOptions{Addr: "127.0.0.1:0", CertDir: t.TempDir(), LocalURL: true},
			Logger:   testLogger(t),
		})
	})
	alpha, beta := clients(t, rc, "default")
	if err := waitWebhooks(ctx, alpha); err != nil {
		t.Fatal(err)
	}

	// Written as v1alpha1, read as v1beta1, written back as v1beta1, read
	// as v1alpha1: the same spec, character for character.
	for i, tc := range []struct {
		schedule string
		want     v1beta1.Schedule
		image    string
	}{
		{"2030-01-02T03:04:05Z", v1beta1.Schedule{Date: "2030-01-02", Time: "03:04:05", Offset: "Z"}, ""},
		{"2030-01-02T03:04:05.250Z", v1beta1.Schedule{Date: "2030-01-02", Time: "03:04:05.250", Offset: "Z"}, "alpine:3"},
		{"2030-06-30T23:59:59+05:45", v1beta1.Schedule{Date: "2030-06-30", Time: "23:59:59", Offset: "+05:45"}, ""},
		{"2031-12-31T00:00:00-09:30", v1beta1.Schedule{Date: "2031-12-31", Time: "00:00:00", Offset: "-09:30"}, "busybox:1.36"},
	} {
		name := "round-trip-" + string(rune('a'+i))
		in, err := alpha.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"case": name}},
			Spec: v1alpha1.AtSpec{Schedule: tc.schedule, Command: "date", Image: tc.image}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: create v1alpha1: %v", tc.schedule, err)
		}
		b, err := beta.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: get v1beta1: %v", tc.schedule, err)
		}
		if b.APIVersion != "cnat.programming-kubernetes.info/v1beta1" || b.Spec.Schedule != tc.want || b.Spec.Command != "date" || b.Spec.Image != in.Spec.Image {
			t.Fatalf("%s: v1beta1 %s spec %+v, want schedule %+v", tc.schedule, b.APIVersion, b.Spec, tc.want)
		}
		// (Mutate: the operator writes the At too, its finalizer and status.)
		if _, err := beta.Mutate(ctx, name, func(b *v1beta1.At) error {
			b.Labels["touched"] = "v1beta1"
			return nil
		}); err != nil {
			t.Fatalf("%s: update v1beta1: %v", tc.schedule, err)
		}
		out, err := alpha.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(out.Spec, in.Spec) || out.Labels["touched"] != "v1beta1" {
			t.Fatalf("%s: round trip gave spec %+v labels %v, want spec %+v", tc.schedule, out.Spec, out.Labels, in.Spec)
		}
	}
	// Written as v1beta1 without a command: defaulted (the API server
	// converts to v1alpha1 for the webhooks), and reads back the same.
	created, err := beta.Create(ctx, &v1beta1.At{ObjectMeta: metav1.ObjectMeta{Name: "from-beta"},
		Spec: v1beta1.AtSpec{Schedule: v1beta1.Schedule{Date: "2030-05-05", Time: "05:05:05"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Command != operator.DefaultCommand || created.Spec.Schedule.Offset != "Z" {
		t.Fatalf("v1beta1 create: spec %+v, want the default command and offset", created.Spec)
	}
	a, err := alpha.Get(ctx, "from-beta", metav1.GetOptions{})
	if err != nil || a.Spec.Schedule != "2030-05-05T05:05:05Z" || a.Spec.Command != operator.DefaultCommand {
		t.Fatalf("v1alpha1 read of a v1beta1 write: %+v, %v", a.Spec, err)
	}

	// Past schedules are refused in either version, with our message,
	// which kubectl shows.
	_, err = beta.Create(ctx, &v1beta1.At{ObjectMeta: metav1.ObjectMeta{Name: "past"},
		Spec: v1beta1.AtSpec{Schedule: v1beta1.Schedule{Date: "2020-01-01", Time: "00:00:00"}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "is in the past") {
		t.Fatalf("v1beta1 create in the past: %v, want our refusal", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.AssetsDir(), "kubectl"), "--kubeconfig", env.KubeconfigPath, "create", "-f", "-")
	cmd.Stdin = strings.NewReader(`apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: too-late}
spec: {schedule: "2021-03-04T05:06:07Z", command: "true"}
`)
	out, err := cmd.CombinedOutput()
	// The webhook denies with an Invalid status (422 with field causes),
	// which the API server passes on as it is: kubectl prints it like a
	// schema error.
	want := `The At "too-late" is invalid: spec.schedule: Invalid value: "2021-03-04T05:06:07Z": is in the past (now is `
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("kubectl create of a past At: %v\n%s\nwant it to show:\n%s", err, out, want)
	}
	t.Logf("kubectl says: %s", strings.TrimSpace(string(out)))
}
