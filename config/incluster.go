package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// DefaultServiceAccountDir is where the kubelet mounts a pod's
// service-account token, CA certificate and namespace.
const DefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// InClusterOptions configure [InCluster]. The zero value reads the standard
// locations.
type InClusterOptions struct {
	// Dir holds the token, ca.crt and namespace files. Empty means
	// [DefaultServiceAccountDir].
	Dir string
	// Getenv reads environment variables. Nil means os.Getenv.
	Getenv func(string) string
}

// InCluster returns the configuration of a pod's service account: the API
// server from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (always
// https), the CA from ca.crt, the namespace from the namespace file (or
// "default"), and the token as Auth.BearerTokenFile so that package rest
// re-reads it as the kubelet rotates it. The CA is TLS.CAFile, which
// package rest reads again when it changes, as when the cluster's CA
// bundle is rotated.
//
// Outside a cluster it returns an error wrapping [ErrNotInCluster]. A
// missing token or CA file is a [*Error] naming the file.
func InCluster(opts InClusterOptions) (Config, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, fmt.Errorf("config: %w", ErrNotInCluster)
	}
	dir := opts.Dir
	if dir == "" {
		dir = DefaultServiceAccountDir
	}
	tokenFile := filepath.Join(dir, "token")
	caFile := filepath.Join(dir, "ca.crt")
	if err := checkFile(tokenFile, "token", tokenFile); err != nil {
		return Config{}, err
	}
	if err := checkFile(caFile, "ca.crt", caFile); err != nil {
		return Config{}, err
	}
	ns := "default"
	if b, err := os.ReadFile(filepath.Join(dir, "namespace")); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			ns = s
		}
	}
	return Config{
		Host:      "https://" + net.JoinHostPort(host, port),
		Namespace: ns,
		TLS:       TLS{CAFile: caFile},
		Auth:      Auth{BearerTokenFile: tokenFile, Origin: "in-cluster"},
		Origin:    "in-cluster",
	}, nil
}
