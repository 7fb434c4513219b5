package testenv

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPodLogsThroughKwok shows that pods on fake nodes have logs: kwok
// serves PodLogFile as every container's log, through kube-apiserver's
// pods/log subresource.
func TestPodLogsThroughKwok(t *testing.T) {
	env := New(t, Options{Controllers: true, Scheduler: true, Nodes: 1})
	if err := env.AppendPodLog("line one", "line two"); err != nil {
		t.Fatal(err)
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "talker"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}
	if code := do(t, env, http.MethodPost, "/api/v1/namespaces/default/pods", pod, nil); code != http.StatusCreated {
		t.Fatalf("create pod: %d", code)
	}
	hc, err := env.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	// The pod needs to be scheduled and started first: poll until the log
	// answers.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var code int
	var body string
	for {
		code, body, err = env.get(ctx, hc, "/api/v1/namespaces/default/pods/talker/log?tailLines=1")
		if err == nil && code == http.StatusOK {
			break
		}
		select {
		case <-ctx.Done():
			out, _ := kubectl(t, env.KubeconfigPath, "get", "pods,nodes", "-o", "wide")
			desc, _ := kubectl(t, env.KubeconfigPath, "describe", "pod", "talker")
			t.Fatalf("no logs: %d %v %s\n%s\n%s", code, err, body, out, desc)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if body != "line two\n" {
		t.Fatalf("tailLines=1 gave %q", body)
	}
	_, body, err = env.get(ctx, hc, "/api/v1/namespaces/default/pods/talker/log?timestamps=true")
	if err != nil || !strings.Contains(body, "Z line one\n") {
		t.Fatalf("timestamps: %q %v", body, err)
	}
}
