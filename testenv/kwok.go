package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/pki"
)

// NodeName returns the name of fake node i (0-based).
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// startKwok starts kwok managing every node, with the stage configuration
// that tools/build.sh wrote beside the binaries, then creates Options.Nodes
// fake nodes and waits until all are Ready.
func (e *Env) startKwok(ctx context.Context, bin string) error {
	stages := filepath.Join(filepath.Dir(bin), "kwok-stages.yaml")
	if _, err := binaryFile(stages); err != nil {
		return &MissingBinaryError{Name: "kwok-stages.yaml", Path: stages}
	}
	// kwok also serves the kubelet API for its nodes (logs, exec) on one
	// port, with a certificate from our CA; every fake container's log is
	// the file PodLogFile.
	port, err := freePort()
	if err != nil {
		return err
	}
	cert, key, err := issue(e.ca, pki.Request{CommonName: "kwok", Server: true, DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		return fmt.Errorf("testenv: kwok certificate: %w", err)
	}
	e.PodLogFile = e.path("pod.log")
	logs := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: testenv
spec:
  logs:
  - logsFile: %q
    previousLogsFile: %q
    follow: true
`, e.PodLogFile, e.PodLogFile)
	if err := writeFiles(map[string][]byte{e.path("kwok.crt"): cert, e.path("kwok.key"): key, e.path("kwok-logs.yaml"): []byte(logs)}); err != nil {
		return err
	}
	if _, err := os.Stat(e.PodLogFile); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(e.PodLogFile, nil, 0o600); err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
	}
	manage := "--manage-all-nodes=true"
	if e.opts.RealNodes > 0 {
		// Real kubelets run their own nodes: kwok keeps to the fake ones.
		manage = "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake"
	}
	p, err := e.addProc("kwok", bin, []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--config=" + stages,
		"--config=" + e.path("kwok-logs.yaml"),
		manage,
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(port),
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--tls-cert-file=" + e.path("kwok.crt"),
		"--tls-private-key-file=" + e.path("kwok.key"),
	})
	if err != nil {
		return err
	}
	hc, err := e.HTTPClient()
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	for i := range e.opts.Nodes {
		if err := e.createNode(ctx, hc, NodeName(i)); err != nil {
			return err
		}
	}
	return e.waitFor(ctx, "fake nodes to be Ready", p, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := e.getJSON(ctx, hc, "/api/v1/nodes", &nodes); err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes.Items {
			if ok, _ := nodeReady(n); ok {
				ready++
			}
		}
		return ready >= e.opts.Nodes, fmt.Errorf("%d of %d nodes Ready", ready, e.opts.Nodes)
	})
}

// createNode creates a fake node, or leaves it if a kept state folder
// already has it.
func (e *Env) createNode(ctx context.Context, hc *http.Client, name string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	b, err := json.Marshal(&node)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/api/v1/nodes", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("testenv: create node %s: %w", name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("testenv: create node %s: %s: %s", name, resp.Status, body)
	}
	return nil
}

// AppendPodLog appends lines to PodLogFile, each stamped with the current
// time in the CRI log format ("<RFC 3339 time> stdout F <line>"), so that
// every container on the fake nodes logs them. Requests with
// timestamps=true see the same times.
func (e *Env) AppendPodLog(lines ...string) error {
	if e.PodLogFile == "" {
		return errors.New("testenv: no fake nodes, so no pod logs (set Options.Nodes)")
	}
	f, err := os.OpenFile(e.PodLogFile, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	var b bytes.Buffer
	for _, l := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), l)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("testenv: %w", err)
	}
	return f.Close()
}
