package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// startEtcd starts etcd on two free ports with its data in Dir/etcd.
func (e *Env) startEtcd(ctx context.Context, bin string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	client, peer := ports[0], ports[1]
	e.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	args := []string{
		"--name=loom",
		"--data-dir=" + e.path("etcd"),
		"--listen-client-urls=" + e.EtcdURL,
		"--advertise-client-urls=" + e.EtcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=loom=" + peerURL,
		"--unsafe-no-fsync=true", // tests and dev clusters trade durability for speed
		"--log-level=warn",
	}
	p, err := e.addProc("etcd", bin, args)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.etcd = p
	e.mu.Unlock()
	return e.waitEtcd(ctx, p)
}

func (e *Env) waitEtcd(ctx context.Context, p *proc) error {
	return e.waitFor(ctx, "etcd /health", p, func(ctx context.Context) (bool, error) {
		var h struct {
			Health string `json:"health"`
		}
		if err := e.etcdCall(ctx, http.MethodGet, "/health", nil, &h); err != nil {
			return false, err
		}
		return h.Health == "true", nil
	})
}

// StopEtcd kills etcd (SIGKILL). kube-apiserver keeps running and fails its
// requests until StartEtcd.
func (e *Env) StopEtcd(ctx context.Context) error {
	if e.sharedDir != "" {
		return ErrShared
	}
	e.mu.Lock()
	p := e.etcd
	e.mu.Unlock()
	p.stop(0)
	return nil
}

// StartEtcd starts etcd again after StopEtcd, on the same port and data.
func (e *Env) StartEtcd(ctx context.Context) error {
	if e.sharedDir != "" {
		return ErrShared
	}
	e.mu.Lock()
	p := e.etcd
	e.mu.Unlock()
	select {
	case <-p.exited():
	default:
		return fmt.Errorf("testenv: etcd is running")
	}
	if err := p.start(); err != nil {
		return err
	}
	return e.waitEtcd(ctx, p)
}

// Revision returns etcd's current revision, which is the newest
// resourceVersion kube-apiserver has written.
func (e *Env) Revision(ctx context.Context) (int64, error) {
	var r struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// A range over one key is the cheapest call whose header carries the
	// revision. The key "\x00" is base64 "AA==".
	if err := e.etcdCall(ctx, http.MethodPost, "/v3/kv/range", map[string]any{"key": "AA==", "limit": 1}, &r); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(r.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("testenv: etcd revision %q: %w", r.Header.Revision, err)
	}
	return rev, nil
}

// CompactEtcd compacts etcd's history up to rev. rev <= 0 means the
// current revision.
//
// After it, reads at an older resourceVersion (an exact LIST, a continue
// token) fail with 410 Gone. Watches are different: kube-apiserver's watch
// cache keeps its own window of recent events in memory and goes on serving
// watches from within that window whatever etcd has compacted, as on a real
// cluster. To make every watch from an old resourceVersion fail with 410,
// as reflectors see after a long disconnection, follow CompactEtcd with
// RestartAPIServer: the new watch cache starts at the current revision.
func (e *Env) CompactEtcd(ctx context.Context, rev int64) error {
	if rev <= 0 {
		var err error
		if rev, err = e.Revision(ctx); err != nil {
			return err
		}
	}
	return e.etcdCall(ctx, http.MethodPost, "/v3/kv/compaction",
		map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil)
}

// EtcdGet returns the raw value kube-apiserver stored under key, such as
// "/registry/configmaps/default/x", and false if there is none. Together
// with EtcdPut and EtcdDelete it changes objects behind kube-apiserver's
// back, for example while it is stopped, to test what clients make of
// state they never saw change.
func (e *Env) EtcdGet(ctx context.Context, key string) ([]byte, bool, error) {
	var r struct {
		Kvs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := e.etcdCall(ctx, http.MethodPost, "/v3/kv/range", map[string]any{"key": []byte(key)}, &r); err != nil {
		return nil, false, err
	}
	if len(r.Kvs) == 0 {
		return nil, false, nil
	}
	return r.Kvs[0].Value, true, nil
}

// EtcdPut stores value under key; see EtcdGet.
func (e *Env) EtcdPut(ctx context.Context, key string, value []byte) error {
	return e.etcdCall(ctx, http.MethodPost, "/v3/kv/put", map[string]any{"key": []byte(key), "value": value}, nil)
}

// EtcdDelete deletes key; see EtcdGet.
func (e *Env) EtcdDelete(ctx context.Context, key string) error {
	return e.etcdCall(ctx, http.MethodPost, "/v3/kv/deleterange", map[string]any{"key": []byte(key)}, nil)
}

// etcdCall sends a request to etcd's JSON gateway.
func (e *Env) etcdCall(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.EtcdURL+path, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("testenv: etcd %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("testenv: etcd %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("testenv: etcd %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("testenv: etcd %s: %w", path, err)
		}
	}
	return nil
}
