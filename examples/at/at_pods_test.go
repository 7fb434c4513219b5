//go:build linux

package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/at/operator"
	"github.com/loom-k8s/loom/internal/ociimage"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
)

// The images TestOperatorAsPods imports into the real nodes: the operator
// as the Deployment names it, a second tag of it for the rolling update,
// and a small image whose sh the At's Pods run.
const (
	operatorImage   = "loom-examples/at-operator:latest"
	operatorImageV2 = "loom-examples/at-operator:v2"
	shImage         = "loom.local/at-sh:test"
)

// TestOperatorAsPods deploys the operator with its own manifests (config/,
// through testdata/realnodes, which only sets two replicas and never
// pulling) into a cluster with a real node, and checks, in order: the
// Deployment becomes available (the replicas read in-cluster config and
// reach kube-apiserver through the "kubernetes" Service); the webhooks
// answer through their Service (defaulting, validating, conversion); an At
// is reconciled to DONE; deleting the leader's Pod hands the Lease to the
// other replica, which starts leading only after the old leader released
// it, and reconciles a new At; a rolling update to a second image
// completes while Ats are created through the webhooks, with no failed
// call.
func TestOperatorAsPods(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster with a real node")
	}
	if os.Getenv("LOOM_OPERATOR_PODS") == "" {
		// About a minute and a half: its own make target. make test runs
		// testenv's real-node tests, which run a Pod and a webhook in one.
		t.Skip("the At operator as Pods on a real node: make real-nodes runs it (LOOM_OPERATOR_PODS=1)")
	}
	env := startRealNodeEnv(t)
	ctx := t.Context()
	t0 := time.Now()

	// The images.
	opImg, err := ociimage.Build(ctx, ociimage.Options{Package: "."})
	if err != nil {
		t.Fatal(err)
	}
	// The second image: the same program, another image (a label).
	cfg, err := opImg.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config.DeepCopy()
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels["dev.loom.test/revision"] = "2"
	opImgV2, err := mutate.Config(opImg, *c)
	if err != nil {
		t.Fatal(err)
	}
	for ref, img := range map[string]v1.Image{operatorImage: opImg, operatorImageV2: opImgV2, shImage: buildShImage(t)} {
		if err := env.ImportImage(ctx, ref, img); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("images built and imported in %s", time.Since(t0).Round(time.Millisecond))

	// The manifests, as a user applies them.
	applied := time.Now()
	e2e.Kubectl(t, env, "apply", "-k", "testdata/realnodes")
	admin := e2e.Admin(t, env)
	rc, err := rest.New(admin, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	deployments, err := client.For[appsv1.Deployment](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := client.For[corev1.Pod](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := client.For[coordinationv1.Lease](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deployments, pods, leases = deployments.Namespace(operator.WebhookNamespace), pods.Namespace(operator.WebhookNamespace), leases.Namespace(operator.WebhookNamespace)
	alpha, beta := clients(t, rc, "default")
	defer func() {
		if t.Failed() {
			out, _ := e2e.KubectlErr(env, "-n", operator.WebhookNamespace, "describe", "deployment,replicasets,pods")
			t.Log(out)
			out, _ = e2e.KubectlErr(env, "-n", operator.WebhookNamespace, "logs", "-l", "app.kubernetes.io/name=at-operator", "--tail=40", "--prefix")
			t.Log(out)
		}
	}()

	// 1. The Deployment becomes available.
	waitRollout(t, deployments, pods, operatorImage)
	available := time.Since(applied)
	t.Logf("Deployment available (2 replicas) %s after apply", available.Round(time.Millisecond))

	// In-cluster config: a replica holds the Lease, so it reached
	// kube-apiserver through the kubernetes Service with its token.
	var holder string
	e2e.Eventually(t, "a replica to hold the Lease", func() (bool, string) {
		l, err := leases.Get(ctx, "at-operator", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder = leaseHolderPod(l)
		return holder != "", fmt.Sprintf("holder %q", holder)
	})
	if _, err := pods.Get(ctx, holder, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Lease holder %q is not a Pod of the Deployment: %v", holder, err)
	}

	// 2. The webhooks answer through the Service.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := waitWebhooks(wctx, alpha); err != nil {
		t.Fatal(err)
	}
	webhooksAnswer := time.Since(applied)
	t.Logf("webhooks answer through the Service %s after apply", webhooksAnswer.Round(time.Millisecond))
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	defaulted, err := alpha.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: "defaulted"},
		Spec: v1alpha1.AtSpec{Schedule: later}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if defaulted.Spec.Command != operator.DefaultCommand {
		t.Fatalf("the defaulting webhook left command %q, want %q", defaulted.Spec.Command, operator.DefaultCommand)
	}
	_, err = alpha.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: "past"},
		Spec: v1alpha1.AtSpec{Schedule: "2020-01-01T00:00:00Z", Command: "true"}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "is in the past") {
		t.Fatalf("create in the past: %v, want the validating webhook's refusal", err)
	}
	if b, err := beta.Get(ctx, "defaulted", metav1.GetOptions{}); err != nil || b.Spec.Command != operator.DefaultCommand {
		t.Fatalf("read as v1beta1 (conversion webhook): %+v, %v", b, err)
	}

	// 3. An At reconciled to DONE: its Pod runs on the real node.
	runAt(t, alpha, "first")

	// 4. The leader's Pod deleted: the other replica takes the Lease, only
	// once the old leader released it, and reconciles.
	oldLogs := followLogs(t, env, holder)
	deleted := time.Now()
	if err := pods.Delete(ctx, holder, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var newHolder string
	var transitions int32
	e2e.Eventually(t, "another replica to take the Lease", func() (bool, string) {
		l, err := leases.Get(ctx, "at-operator", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		newHolder = leaseHolderPod(l)
		if l.Spec.LeaseTransitions != nil {
			transitions = *l.Spec.LeaseTransitions
		}
		return newHolder != "" && newHolder != holder, fmt.Sprintf("holder %q", newHolder)
	})
	handover := time.Since(deleted)
	t.Logf("leader Pod %s deleted; %s leads %s later (Lease transitions: %d)", holder, newHolder, handover.Round(time.Millisecond), transitions)
	released := logTime(t, oldLogs.wait(t), "released the lease")
	var became time.Time
	e2e.Eventually(t, "the new leader to log that it leads", func() (bool, string) {
		out, err := e2e.KubectlErr(env, "-n", operator.WebhookNamespace, "logs", newHolder)
		if err != nil {
			return false, err.Error()
		}
		became = findLogTime(out, "became leader")
		return !became.IsZero(), "no \"became leader\" line yet"
	})
	if released.After(became) {
		t.Fatalf("overlap: the old leader released the Lease at %s, after the new one started leading at %s", released.Format(time.StampMicro), became.Format(time.StampMicro))
	}
	t.Logf("no overlap: old leader released at %s, new leader began at %s (%s later)", released.Format(time.StampMilli), became.Format(time.StampMilli), became.Sub(released).Round(time.Millisecond))
	runAt(t, alpha, "after-handover")
	waitRollout(t, deployments, pods, operatorImage) // the replacement replica

	// 5. A rolling update to the second image while Ats are created (each
	// through the defaulting and validating webhooks) and read back as
	// v1beta1 (the conversion webhook).
	before := webhookFailures(t, rc)
	var calls, failed atomic.Int64
	var errMu sync.Mutex
	var firstErrs []string
	stop := make(chan struct{})
	var workers sync.WaitGroup
	schedule := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	var next atomic.Int64
	for range 2 {
		workers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("rollout-%d", next.Add(1))
				_, err := alpha.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: v1alpha1.AtSpec{Schedule: schedule, Command: "true"}}, metav1.CreateOptions{})
				calls.Add(1)
				if err == nil {
					_, err = beta.Get(ctx, name, metav1.GetOptions{})
					calls.Add(1)
				}
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if len(firstErrs) < 5 {
						firstErrs = append(firstErrs, fmt.Sprintf("%s %s: %v", time.Now().Format(time.StampMilli), name, err))
					}
					errMu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(2 * time.Second) // calls before the update, too
	patched := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"operator","image":%q}]}}}}`, operatorImageV2)
	if _, err := deployments.Patch(ctx, "at-operator", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		close(stop)
		workers.Wait()
		t.Fatal(err)
	}
	waitRollout(t, deployments, pods, operatorImageV2)
	rollout := time.Since(patched)
	time.Sleep(2 * time.Second) // and after
	close(stop)
	workers.Wait()
	after := webhookFailures(t, rc)
	t.Logf("rolling update to %s done in %s; %d webhook calls (creates and v1beta1 reads) during it, %d failed; kube-apiserver counted %v webhook rejections and %v failed conversions",
		operatorImageV2, rollout.Round(time.Millisecond), calls.Load(), failed.Load(),
		after.Rejections-before.Rejections, after.ConversionFailures-before.ConversionFailures)
	if failed.Load() != 0 || after.Rejections != before.Rejections || after.ConversionFailures != before.ConversionFailures {
		t.Fatalf("webhook calls failed during the rolling update: %d; first: %s", failed.Load(), strings.Join(firstErrs, "; "))
	}
	t.Logf("FIGURES available=%s webhooks=%s handover=%s rollout=%s calls=%d failed=%d",
		available.Round(time.Millisecond), webhooksAnswer.Round(time.Millisecond), handover.Round(time.Millisecond),
		rollout.Round(time.Millisecond), calls.Load(), failed.Load())
}

// startRealNodeEnv starts a control plane with one real node and
// kube-controller-manager and kube-scheduler, stopped when the test ends.
// It skips the test when this machine cannot run real nodes (failing
// instead with CI=true), and holds the lock testenv's own tests with real
// nodes take, as each compares the machine before and after.
func startRealNodeEnv(t *testing.T) *testenv.Env {
	t.Helper()
	unavailable := func(err error) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real nodes unavailable with CI=true: %v", err)
		}
		t.Skipf("real nodes unavailable here: %v", err)
	}
	kubelet := filepath.Join(testenv.AssetsDir(), "kubelet")
	f, err := os.Open(kubelet)
	if err != nil {
		unavailable(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// Once the env has stopped (cleanups run last first): no network link
	// or nftables table of its own is left (testenv's TestRealNodePodRuns
	// compares the rest of the machine).
	before := hostNetwork(t)
	t.Cleanup(func() {
		if after := hostNetwork(t); after != before {
			t.Errorf("the machine's network changed after Stop:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{Controllers: true, Scheduler: true, RealNodes: 1})
	var missing *testenv.MissingBinaryError
	if errors.Is(err, testenv.ErrRealNodesUnavailable) || errors.As(err, &missing) {
		unavailable(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(30))
		}
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("control plane and a real node ready in %s (kube-apiserver at %s)", time.Since(start).Round(time.Millisecond), env.URL)
	return env
}

// hostNetwork lists the machine's network links and nftables tables.
func hostNetwork(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			lines = append(lines, "link "+f[1])
		}
	}
	if out, err := exec.Command("nft", "list", "tables").Output(); err == nil {
		lines = append(lines, strings.Split(strings.TrimSpace(string(out)), "\n")...)
	}
	return strings.Join(lines, "\n")
}

// waitRollout waits until the operator's Deployment has rolled out image:
// two updated replicas available, and no other Pod of it left.
func waitRollout(t *testing.T, deployments *client.Client[*appsv1.Deployment], pods *client.Client[*corev1.Pod], image string) {
	t.Helper()
	ctx := t.Context()
	e2e.Eventually(t, "the Deployment to run 2 available replicas of "+image, func() (bool, string) {
		d, err := deployments.Get(ctx, "at-operator", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		state := fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d", d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != 2 || st.AvailableReplicas != 2 || st.Replicas != 2 {
			return false, state
		}
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=at-operator"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image {
				return false, state + fmt.Sprintf("; Pod %s (%s) still there", p.Name, p.Spec.Containers[0].Image)
			}
		}
		return len(list.Items) == 2, state + fmt.Sprintf("; %d Pods", len(list.Items))
	})
}

// leaseHolderPod is the name of the Pod holding the Lease: the elector's
// identity is the host name (the Pod's name) and a random suffix.
func leaseHolderPod(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	name, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
	return name
}

// runAt creates an At due in two seconds, which runs sh -c true from
// shImage, and waits until it is DONE and succeeded.
func runAt(t *testing.T, ats *client.Client[*v1alpha1.At], name string) {
	t.Helper()
	ctx := t.Context()
	created := time.Now()
	if _, err := ats.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.AtSpec{Schedule: time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339), Command: "true", Image: shImage}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "At "+name+" to be DONE", func() (bool, string) {
		a, err := ats.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if a.Status.Phase != v1alpha1.PhaseDone {
			return false, fmt.Sprintf("phase %q", a.Status.Phase)
		}
		if c := meta(a.Status.Conditions, "Succeeded"); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("At %s DONE without success: %+v", name, a.Status)
		}
		return true, ""
	})
	t.Logf("At %s DONE %s after create", name, time.Since(created).Round(time.Millisecond))
}

// logFollower collects a Pod's log (kubectl logs -f) until its container
// ends.
type logFollower struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
}

func followLogs(t *testing.T, env *testenv.Env, pod string) *logFollower {
	t.Helper()
	f := &logFollower{done: make(chan struct{})}
	f.cmd = exec.Command(filepath.Join(testenv.AssetsDir(), "kubectl"), "--kubeconfig", env.KubeconfigPath,
		"-n", operator.WebhookNamespace, "logs", "-f", pod)
	f.cmd.Stdout, f.cmd.Stderr = &f.out, &f.out
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.cmd.Wait(); close(f.done) }()
	t.Cleanup(func() {
		_ = f.cmd.Process.Kill()
		<-f.done
	})
	// Let it attach before the Pod goes.
	time.Sleep(time.Second)
	return f
}

// wait returns the log once the container has ended (or after two
// minutes, with what it has).
func (f *logFollower) wait(t *testing.T) string {
	select {
	case <-f.done:
	case <-time.After(2 * time.Minute):
		t.Logf("the old leader's log did not end in 2 minutes")
		_ = f.cmd.Process.Kill()
		<-f.done
	}
	return f.out.String()
}

// logTime is the time of the log line with msg, failing the test
// without one.
func logTime(t *testing.T, log, msg string) time.Time {
	t.Helper()
	at := findLogTime(log, msg)
	if at.IsZero() {
		t.Fatalf("no %q line in the log:\n%s", msg, tail(log, 30))
	}
	return at
}

// findLogTime finds the first slog text line whose msg is msg and returns
// its time, or the zero time.
func findLogTime(log, msg string) time.Time {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.Contains(l, "msg="+fmt.Sprintf("%q", msg)) && !strings.Contains(l, "msg="+msg+" ") {
			continue
		}
		rest, ok := strings.CutPrefix(l, "time=")
		if !ok {
			continue
		}
		ts, _, _ := strings.Cut(rest, " ")
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return at
		}
	}
	return time.Time{}
}

// shProgram stands in for sh in the At's Pods, which have no shell: it
// takes `sh -c COMMAND`, prints the command and exits 0, or 1 for the
// command "false".
const shProgram = `package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "-c" {
		fmt.Fprintln(os.Stderr, "usage: sh -c COMMAND")
		os.Exit(2)
	}
	fmt.Println("sh -c", os.Args[2])
	if os.Args[2] == "false" {
		os.Exit(1)
	}
}
`

// buildShImage builds shProgram into an image with /bin/sh a link to it.
func buildShImage(t *testing.T) v1.Image {
	t.Helper()
	src := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module loom.local/sh\n\ngo 1.21\n", "main.go": shProgram} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img, err := ociimage.Build(t.Context(), ociimage.Options{Dir: src, Package: "."})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755},
		{Typeflag: tar.TypeSymlink, Name: "bin/sh", Linkname: ociimage.Entrypoint, Mode: 0o777},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
