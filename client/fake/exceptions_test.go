package fake_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/loom-k8s/loom/rest"
)

// The tests here pin down where the fake knowingly differs from
// kube-apiserver (see "What it does not do" in the package
// documentation). Each runs against the fake and, when testenv's
// binaries are installed, against kube-apiserver, and checks each
// server's own answer.

// onBoth runs f against the fake and, when it can, kube-apiserver, in a
// namespace of the test's own.
func onBoth(t *testing.T, f func(t *testing.T, tg target, ns string, real bool)) {
	t.Run("fake", func(t *testing.T) {
		tg := fakeTarget(t)
		f(t, tg, mkNamespace(t, tg, "exc"), false)
	})
	t.Run("kube-apiserver", func(t *testing.T) {
		tg, ok := realTarget(t)
		if !ok {
			t.Skip("kube-apiserver is not installed (or -short or -fake-only)")
		}
		f(t, tg, mkNamespace(t, tg, fmt.Sprintf("exc-%d", time.Now().UnixNano()%1e6)), true)
	})
}

func mkNamespace(t *testing.T, tg target, ns string) string {
	t.Helper()
	if _, err := tg.rc.Post().AbsPath("/api/v1/namespaces").Body([]byte(`{"metadata":{"name":"` + ns + `"}}`)).DoRaw(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ns
}

// do sends a request and returns the code and the decoded answer.
func do(t *testing.T, req *rest.Request) (int, map[string]any) {
	t.Helper()
	res, err := req.DoRaw(t.Context())
	if err != nil {
		if se, ok := err.(*rest.StatusError); ok {
			return se.Code, map[string]any{"message": se.ErrStatus.Message}
		}
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(res.Body, &obj); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, obj
}

func field(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	return cur
}

// TestExceptionNoDefaulting: kube-apiserver defaults built-in kinds (a
// Deployment's strategy, a container's terminationMessagePath); the fake
// stores them as written (only a Secret's type is defaulted).
func TestExceptionNoDefaulting(t *testing.T) {
	onBoth(t, func(t *testing.T, tg target, ns string, real bool) {
		body := `{"metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}`
		code, obj := do(t, tg.rc.Post().AbsPath("/apis/apps/v1/namespaces/"+ns+"/deployments").Body([]byte(body)))
		if code != 201 {
			t.Fatalf("create: %d %v", code, obj)
		}
		strategy, replicas := field(obj, "spec", "strategy", "type"), field(obj, "spec", "replicas")
		if real && (strategy != "RollingUpdate" || replicas != float64(1)) {
			t.Errorf("kube-apiserver: strategy %v, replicas %v: want RollingUpdate and 1", strategy, replicas)
		}
		if !real && (strategy != nil || replicas != nil) {
			t.Errorf("fake: strategy %v, replicas %v: want none", strategy, replicas)
		}
	})
}

// TestExceptionNoValueValidation: kube-apiserver validates custom
// resources against their schema (enum, CEL rules) and applies its
// defaults; the fake only prunes.
func TestExceptionNoValueValidation(t *testing.T) {
	onBoth(t, func(t *testing.T, tg target, ns string, real bool) {
		path := "/apis/corpus.loom.dev/v1/namespaces/" + ns + "/gadgets"
		code, obj := do(t, tg.rc.Post().AbsPath(path).Body([]byte(`{"apiVersion":"corpus.loom.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"color":"green"}}`)))
		if real && code != 422 {
			t.Errorf("kube-apiserver: a color outside the enum: %d %v, want 422", code, obj)
		}
		if !real && code != 201 {
			t.Errorf("fake: a color outside the enum: %d %v, want 201", code, obj)
		}
		code, obj = do(t, tg.rc.Post().AbsPath(path).Body([]byte(`{"apiVersion":"corpus.loom.dev/v1","kind":"Gadget","metadata":{"name":"h"},"spec":{"color":"red"}}`)))
		if code != 201 {
			t.Fatalf("create: %d %v", code, obj)
		}
		if name := field(obj, "spec", "name"); real && name != "unnamed" || !real && name != nil {
			t.Errorf("real=%v: spec.name %v (the schema's default is unnamed; the fake sets none)", real, name)
		}
		code, obj = do(t, tg.rc.Patch("application/merge-patch+json").AbsPath(path+"/h").Body([]byte(`{"spec":{"name":"renamed"}}`)))
		if real && code != 422 {
			t.Errorf("kube-apiserver: breaking a CEL rule: %d %v, want 422", code, obj)
		}
		if !real && code != 200 {
			t.Errorf("fake: breaking a CEL rule: %d %v, want 200", code, obj)
		}
	})
}

// TestExceptionNamespaceDeletion: kube-apiserver leaves a deleted
// namespace Terminating until the namespace controller (of
// kube-controller-manager) has emptied it; the fake does that work at
// once.
func TestExceptionNamespaceDeletion(t *testing.T) {
	onBoth(t, func(t *testing.T, tg target, ns string, real bool) {
		if code, obj := do(t, tg.rc.Post().AbsPath("/api/v1/namespaces/"+ns+"/configmaps").Body([]byte(`{"metadata":{"name":"a"}}`))); code != 201 {
			t.Fatalf("create: %d %v", code, obj)
		}
		if code, obj := do(t, tg.rc.Delete().AbsPath("/api/v1/namespaces/"+ns)); code != 200 || field(obj, "status", "phase") != "Terminating" {
			t.Fatalf("delete: %d %v, want the namespace Terminating", code, obj)
		}
		code, obj := do(t, tg.rc.Get().AbsPath("/api/v1/namespaces/"+ns))
		if real && (code != 200 || field(obj, "status", "phase") != "Terminating") {
			t.Errorf("kube-apiserver: %d %v, want it still Terminating", code, obj)
		}
		if !real && code != 404 {
			t.Errorf("fake: %d %v, want it gone", code, obj)
		}
	})
}

// TestExceptionNoAllocation: kube-apiserver gives a Service a cluster IP;
// the fake allocates nothing.
func TestExceptionNoAllocation(t *testing.T) {
	onBoth(t, func(t *testing.T, tg target, ns string, real bool) {
		code, obj := do(t, tg.rc.Post().AbsPath("/api/v1/namespaces/"+ns+"/services").Body([]byte(`{"metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}}`)))
		if code != 201 {
			t.Fatalf("create: %d %v", code, obj)
		}
		ip, _ := field(obj, "spec", "clusterIP").(string)
		if real == (ip == "") {
			t.Errorf("real=%v: clusterIP %q", real, ip)
		}
	})
}
