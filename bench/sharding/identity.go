package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/rest"
)

// replicaKubeconfig makes the service account the replicas run as, bound
// to cluster-admin, and writes a kubeconfig with a one-hour token for it
// from the TokenRequest API. In a cluster a controller's pods
// authenticate this way, with a bearer token that kube-apiserver checks
// once and then caches; testenv's admin kubeconfig holds a client
// certificate instead, whose chain kube-apiserver verifies on every
// request (about 7 % of its CPU in this scenario).
func (r *run) replicaKubeconfig(ctx context.Context, rc *rest.Client) (string, error) {
	sa := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "replica", "namespace": ns}}
	if err := rc.Post().Version("v1").Namespace(ns).Resource("serviceaccounts").Body(sa).Do(ctx, nil); err != nil {
		return "", fmt.Errorf("create the replicas' service account: %w", err)
	}
	crb := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "bench-replica"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "replica", "namespace": ns}}}
	if err := rc.Post().Group("rbac.authorization.k8s.io").Version("v1").Resource("clusterrolebindings").Body(crb).Do(ctx, nil); err != nil {
		return "", fmt.Errorf("bind the replicas' service account: %w", err)
	}
	hour := int64(3600)
	var tr authenticationv1.TokenRequest
	err := rc.Post().Version("v1").Namespace(ns).Resource("serviceaccounts").Name("replica").SubResource("token").
		Body(&authenticationv1.TokenRequest{
			TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
			Spec:     authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
		}).Do(ctx, &tr)
	if err != nil {
		return "", fmt.Errorf("token for the replicas: %w", err)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: replica
  user:
    token: %s
contexts:
- name: replica
  context:
    cluster: testenv
    user: replica
current-context: replica
`, r.host, base64.StdEncoding.EncodeToString(r.env.CAPEM), tr.Status.Token)
	path := filepath.Join(r.opts.Dir, "replica.kubeconfig")
	return path, os.WriteFile(path, []byte(kc), 0o600)
}
