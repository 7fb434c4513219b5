package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/at/operator"
	"github.com/loom-k8s/loom/internal/pki"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
	"github.com/loom-k8s/loom/webhook"
)

// TestWebhooksOnThreeReplicas runs three replicas of the operator as OS
// processes, all serving webhooks, behind a round-robin TCP proxy that
// stands in for the Service (the webhook configurations and the CRD's
// conversion point at it). It drives creates, each read back in the other
// version (a conversion), while every replica is restarted in turn and one
// CA rotation is forced. No call may fail, at the callers or in the API
// server's own counts of admission webhook rejections and failed
// conversion requests.
//
// LOOM_HA_CREATES sets the number of creates (default 300; make
// ha-webhooks runs 3,000).
func TestWebhooksOnThreeReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three operator processes")
	}
	creates := 300
	if v := os.Getenv("LOOM_HA_CREATES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("LOOM_HA_CREATES=%q: want a number of at least 10", v)
		}
		creates = n
	}
	env := testenv.New(t, testenv.Options{})
	ctx := t.Context()
	_, rc := install(t, env)

	dir := t.TempDir()
	bin := filepath.Join(dir, "at")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// Three ports for the replicas, and the proxy in front of them.
	var backends []string
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		backends = append(backends, l.Addr().String())
		l.Close()
	}
	px := startProxy(t, backends)
	url := "https://" + px.addr

	// The replicas run as the operator's service account, with the Role
	// and ClusterRole of config/rbac: what they need of the CA Secret, the
	// Lease and the webhook configurations is granted there, or the test
	// fails.
	sa := e2e.ServiceAccount(t, env, operator.WebhookNamespace, "at-operator")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n"+
		"users:\n- name: u\n  user:\n    token: %s\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n",
		env.URL, base64.StdEncoding.EncodeToString(env.CAPEM), sa.Auth.BearerToken)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	replicas := make([]*haReplica, 3)
	start := func(i int) {
		replicas[i] = startHAReplica(t, bin, kubeconfig, dir, i, backends[i], url)
	}
	for i := range replicas {
		start(i)
	}

	ns := "default"
	alpha, beta := clients(t, rc, ns)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := waitWebhooks(wctx, alpha); err != nil {
		t.Fatal(err)
	}
	secrets, err := client.For[corev1.Secret](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secrets = secrets.Namespace(operator.WebhookNamespace)
	caSecret := operator.WebhookService + "-ca"
	sec, err := secrets.Get(ctx, caSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	firstCA := pki.DecodeCerts(sec.Data[webhook.SharedCACertKey])[0]
	// Until the leader first injects the proxy's URL, the CRD points at
	// the Service, which no one serves here; kube-apiserver's watch cache
	// keeps retrying conversions through that configuration for a moment
	// after it changed. Count from when its failures have stopped.
	before := webhookFailures(t, rc)
	for quiet := 0; quiet < 3; {
		time.Sleep(time.Second)
		now := webhookFailures(t, rc)
		quiet++
		if now.ConversionFailures != before.ConversionFailures {
			quiet = 0
		}
		before = now
	}

	// The callers: four workers create Ats and read each back as
	// v1beta1, until every create is done and the disruptions are over.
	var next, done, failed atomic.Int64
	var errMu sync.Mutex
	var firstErrs []string
	fail := func(err error) {
		failed.Add(1)
		errMu.Lock()
		if len(firstErrs) < 5 {
			firstErrs = append(firstErrs, err.Error())
		}
		errMu.Unlock()
	}
	disrupted := make(chan struct{})
	var workers sync.WaitGroup
	schedule := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	for range 4 {
		workers.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(creates) {
					select {
					case <-disrupted:
						return
					default:
					}
				}
				name := fmt.Sprintf("ha-%d", i)
				if _, err := alpha.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: v1alpha1.AtSpec{Schedule: schedule, Command: "true"}}, metav1.CreateOptions{}); err != nil {
					fail(fmt.Errorf("create %s: %w", name, err))
					continue
				}
				if _, err := beta.Get(ctx, name, metav1.GetOptions{}); err != nil {
					fail(fmt.Errorf("get %s as v1beta1: %w", name, err))
					continue
				}
				done.Add(1)
			}
		})
	}

	// The disruptions, spread over the run: each replica restarted in
	// turn (SIGTERM, then started again once it has exited), and one CA
	// rotation, waited for to its end.
	waitDone := func(n int64) {
		e2e.Eventually(t, fmt.Sprintf("%d calls done", n), func() (bool, string) {
			return done.Load()+failed.Load() >= n, fmt.Sprintf("%d done, %d failed", done.Load(), failed.Load())
		})
	}
	step := int64(creates) / 6
	for i := range replicas {
		waitDone(int64(i+1) * step)
		replicas[i].stop(t)
		start(i)
		replicas[i].waitServing(t)
		t.Logf("replica %d restarted after %d calls", i, done.Load())
	}
	waitDone(4 * step)
	if err := requestRotation(ctx, secrets, caSecret); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the CA rotation to end (one new CA left in the bundle)", func() (bool, string) {
		sec, err := secrets.Get(ctx, caSecret, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cas := pki.DecodeCerts(sec.Data[webhook.SharedCACertKey])
		return len(cas) == 1 && !cas[0].Equal(firstCA), fmt.Sprintf("%d CAs in the bundle", len(cas))
	})
	t.Logf("CA rotated after %d calls", done.Load())
	close(disrupted)
	workers.Wait()

	after := webhookFailures(t, rc)
	t.Logf("%d creates and %d conversions; %d failed at the callers; API server: %s before, %s after; proxy: %d connections, %d dials refused",
		done.Load(), done.Load(), failed.Load(), before, after, px.conns.Load(), px.refused.Load())
	if failed.Load() > 0 {
		t.Errorf("%d calls failed; first: %s", failed.Load(), strings.Join(firstErrs, "; "))
	}
	if after.Rejections != before.Rejections || after.ConversionFailures != before.ConversionFailures {
		t.Errorf("the API server counted webhook failures: %s before, %s after", before, after)
	}
	// The counts are read at all: every read as v1beta1 was a conversion.
	if after.Conversions-before.Conversions < float64(done.Load()) {
		t.Errorf("the API server counted %.0f conversion requests for %d reads as v1beta1", after.Conversions-before.Conversions, done.Load())
	}
	if done.Load() < int64(creates) {
		t.Errorf("%d calls done, want %d", done.Load(), creates)
	}
}

// requestRotation asks the leader for a CA rotation, as a user would with
// kubectl annotate.
func requestRotation(ctx context.Context, secrets *client.Client[*corev1.Secret], name string) error {
	_, err := secrets.Mutate(ctx, name, func(s *corev1.Secret) error {
		s.Annotations[webhook.SharedCARotateAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		return nil
	})
	return err
}

// webhookCounts are the API server's own counts of webhook calls.
type webhookCounts struct {
	// Rejections: admission webhook calls that rejected or could not be
	// made (apiserver_admission_webhook_rejection_count).
	Rejections float64
	// Conversions and ConversionFailures: conversion webhook requests,
	// by result (apiserver_conversion_webhook_duration_seconds_count).
	Conversions, ConversionFailures float64
}

func (c webhookCounts) String() string {
	return fmt.Sprintf("%.0f admission rejections, %.0f conversion requests of which %.0f failed", c.Rejections, c.Conversions, c.ConversionFailures)
}

// webhookFailures reads the API server's counts of webhook calls.
func webhookFailures(t *testing.T, rc *rest.Client) webhookCounts {
	t.Helper()
	res, err := rc.Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var c webhookCounts
	sc := bufio.NewScanner(strings.NewReader(string(res.Body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), "{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		v, _ := strconv.ParseFloat(value, 64)
		switch strings.TrimSuffix(name, "_total") {
		case "apiserver_admission_webhook_rejection_count":
			c.Rejections += v
		case "apiserver_conversion_webhook_duration_seconds_count":
			c.Conversions += v
			if strings.Contains(labels, `result="failure"`) {
				c.ConversionFailures += v
			}
		}
	}
	return c
}

// haReplica is one operator process.
type haReplica struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
}

func startHAReplica(t *testing.T, bin, kubeconfig, dir string, i int, addr, url string) *haReplica {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("replica-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--webhooks", "--webhook-addr", addr, "--webhook-url", url,
		"--cert-dir", filepath.Join(dir, fmt.Sprintf("certs-%d", i)), "--leader-elect", "--ca-propagation-delay", "3s")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &haReplica{cmd: cmd, addr: addr, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(r.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.exited
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("replica %d log (tail):\n%s", i, tail(string(b), 3000))
			}
		}
	})
	return r
}

// stop sends SIGTERM and waits for the process to exit.
func (r *haReplica) stop(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("replica did not exit within two minutes of SIGTERM")
	}
}

// waitServing waits until the replica completes TLS handshakes.
func (r *haReplica) waitServing(t *testing.T) {
	t.Helper()
	e2e.Eventually(t, "the restarted replica to serve TLS on "+r.addr, func() (bool, string) {
		c, err := tls.Dial("tcp", r.addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// proxy is a round-robin TCP proxy: each connection goes to the next
// backend that accepts it, as a Service sends connections only to ready
// endpoints.
type proxy struct {
	addr    string
	conns   atomic.Int64
	refused atomic.Int64
}

func startProxy(t *testing.T, backends []string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: l.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	var rr atomic.Int64
	wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			track(in, true)
			wg.Go(func() {
				defer func() { in.Close(); track(in, false) }()
				var out net.Conn
				for range len(backends) {
					b := backends[int(rr.Add(1))%len(backends)]
					out, err = net.DialTimeout("tcp", b, 5*time.Second)
					if err == nil {
						break
					}
					p.refused.Add(1)
				}
				if out == nil {
					return
				}
				track(out, true)
				defer func() { out.Close(); track(out, false) }()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
				<-done
				<-done
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
