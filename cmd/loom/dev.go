package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/loom-k8s/loom/testenv"
)

// devState is what `loom dev up` records in the state folder while it runs,
// for `loom dev status` and `loom dev down`.
type devState struct {
	PID        int            `json:"pid"`        // the `loom dev up` process
	Executable string         `json:"executable"` // its binary, to tell it from a reused PID
	URL        string         `json:"url"`
	Kubeconfig string         `json:"kubeconfig"`
	Processes  map[string]int `json:"processes"`
	Registry   string         `json:"registry,omitempty"` // host:port of the image registry (registry.go)
	// RealNodes are the real nodes (--real-nodes), for loom dev import.
	RealNodes []testenv.RealNode `json:"realNodes,omitempty"`
}

const stateFile = "state.json"

func defaultStateDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		if home, err := os.UserHomeDir(); err == nil {
			base = filepath.Join(home, ".cache")
		} else {
			base = os.TempDir()
		}
	}
	return filepath.Join(base, "loom", "dev")
}

func runDev(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: loom dev needs a subcommand: up, down, status or import", errUsage)
	}
	switch args[0] {
	case "up":
		return devUp(ctx, args[1:], out, errOut)
	case "down":
		return devDown(ctx, args[1:], out)
	case "status":
		return devStatus(ctx, args[1:], out)
	case "import":
		return devImport(ctx, args[1:], out)
	}
	return fmt.Errorf("%w: unknown subcommand loom dev %s (want up, down, status or import)", errUsage, args[0])
}

func stateDirFlag(fs *flag.FlagSet) *string {
	return fs.String("state-dir", defaultStateDir(), "folder for the cluster's certificates, kubeconfig, etcd data and logs")
}

// devUp runs a control plane in the foreground until ctx ends (Ctrl-C or
// SIGTERM), then stops every process.
func devUp(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom dev up", flag.ContinueOnError)
	nodes := fs.Int("nodes", 0, "number of fake nodes run by kwok")
	realNodes := fs.Int("real-nodes", 0, "number of real nodes: kubelet and containerd on this machine, so Pods run (Linux, root, and containerd, runc and the CNI plugins installed); load their images with loom dev import")
	controllers := fs.Bool("with-controllers", false, "also run kube-controller-manager and kube-scheduler")
	dir := stateDirFlag(fs)
	verbose := fs.Bool("v", false, "log progress")
	withRegistry := fs.Bool("registry", true, "serve an image registry on 127.0.0.1 for loom build image --dev-registry (images are lost at loom dev down)")
	registryPort := fs.Int("registry-port", 0, "the registry's port on 127.0.0.1 (0: a free one, shown by loom dev status)")
	pos, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(out, "Usage: loom dev up [flags]\n\nRuns a local control plane until Ctrl-C.\n\n%s", flagUsage(fs))
		return err
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: loom dev up takes no arguments, got %q", errUsage, pos)
	}
	if *nodes < 0 {
		return fmt.Errorf("%w: --nodes must be 0 or more", errUsage)
	}
	if *realNodes < 0 || *realNodes > 100 {
		return fmt.Errorf("%w: --real-nodes must be 0 to 100", errUsage)
	}
	if st, err := readState(*dir); err == nil && st.running() {
		return fmt.Errorf("a dev cluster is already running in %s (pid %d); stop it with: loom dev down --state-dir %s", *dir, st.PID, *dir)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: level}))

	var reg *devRegistry
	if *withRegistry {
		if reg, err = startDevRegistry(*dir, *registryPort, log); err != nil {
			return err
		}
		defer reg.Close()
	}

	fmt.Fprintf(out, "Starting a control plane in %s ...\n", *dir)
	env, err := testenv.Start(ctx, testenv.Options{
		Controllers: *controllers,
		Scheduler:   *controllers,
		Nodes:       *nodes,
		RealNodes:   *realNodes,
		Dir:         *dir,
		Logger:      log,
	})
	if err != nil {
		return err
	}
	defer env.Stop()
	exe, _ := os.Executable()
	st := devState{PID: os.Getpid(), Executable: exe, URL: env.URL, Kubeconfig: env.KubeconfigPath, Processes: env.Processes(), RealNodes: env.RealNodes}
	if reg != nil {
		st.Registry = reg.Addr
	}
	if err := writeState(*dir, st); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(*dir, stateFile))

	fmt.Fprintf(out, "Control plane ready at %s\n", env.URL)
	fmt.Fprintf(out, "kubeconfig: %s\n", env.KubeconfigPath)
	fmt.Fprintf(out, "export KUBECONFIG=%s\n", env.KubeconfigPath)
	if reg != nil {
		fmt.Fprintf(out, "Image registry at %s (loom build image --dev-registry --tag NAME:TAG)\n", reg.Addr)
	}
	for _, n := range env.RealNodes {
		fmt.Fprintf(out, "Real node %s: Pod IPs %s on bridge %s\n", n.Name, n.PodIPRange, n.Bridge)
	}
	if len(env.RealNodes) > 0 {
		fmt.Fprintln(out, "Real nodes pull no image: load one with loom dev import FILE.tar (from loom build image --tarball FILE.tar) and use imagePullPolicy: IfNotPresent or Never")
	}
	fmt.Fprintln(out, "Press Ctrl-C to stop.")
	<-ctx.Done()
	fmt.Fprintln(out, "Stopping ...")
	if err := env.Stop(); err != nil {
		return err
	}
	fmt.Fprintln(out, "Stopped.")
	return nil
}

// devDown stops the cluster that `loom dev up` runs in the state folder, by
// sending SIGTERM to it and waiting for it to exit.
func devDown(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loom dev down", flag.ContinueOnError)
	dir := stateDirFlag(fs)
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait before killing the processes")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	st, err := readState(*dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !st.running()) {
		fmt.Fprintf(out, "No dev cluster is running in %s.\n", *dir)
		return nil
	}
	if err != nil {
		return err
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop loom dev up (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(*timeout)
	for st.running() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if st.running() {
		// It did not stop in time: kill it and its servers.
		_ = syscall.Kill(st.PID, syscall.SIGKILL)
		for _, pid := range st.Processes {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = os.Remove(filepath.Join(*dir, stateFile))
		fmt.Fprintf(out, "Killed the dev cluster in %s after %s.\n", *dir, *timeout)
		return nil
	}
	fmt.Fprintf(out, "Stopped the dev cluster in %s.\n", *dir)
	return nil
}

// devStatus prints whether a cluster runs in the state folder and whether
// its API server is ready. With --wait it waits until it is.
func devStatus(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loom dev status", flag.ContinueOnError)
	dir := stateDirFlag(fs)
	wait := fs.Duration("wait", 0, "wait up to this long for the cluster to be ready")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	deadline := time.Now().Add(*wait)
	for {
		st, err := readState(*dir)
		switch {
		case err == nil && st.running():
			readyErr := probe(ctx, *dir, st.URL)
			if readyErr == nil || !time.Now().Before(deadline) {
				printStatus(out, *dir, st, readyErr)
				return readyErr
			}
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return err
		case !time.Now().Before(deadline):
			fmt.Fprintf(out, "No dev cluster is running in %s.\n", *dir)
			return fmt.Errorf("no dev cluster running in %s", *dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func printStatus(out io.Writer, dir string, st devState, readyErr error) {
	ready := "ready"
	if readyErr != nil {
		ready = "not ready: " + readyErr.Error()
	}
	fmt.Fprintf(out, "Dev cluster in %s: running (loom dev up, pid %d)\n", dir, st.PID)
	fmt.Fprintf(out, "  server      %s (%s)\n", st.URL, ready)
	fmt.Fprintf(out, "  kubeconfig  %s\n", st.Kubeconfig)
	printRegistryStatus(out, st)
	for _, n := range st.RealNodes {
		fmt.Fprintf(out, "  real node   %s (kubelet on %s:%d, Pod IPs %s, containerd %s)\n", n.Name, n.IP, n.KubeletPort, n.PodIPRange, n.ContainerdSocket)
	}
	names := make([]string, 0, len(st.Processes))
	for n := range st.Processes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		state := "running"
		if syscall.Kill(st.Processes[n], 0) != nil {
			state = "gone"
		}
		fmt.Fprintf(out, "  %-24s pid %-8d %s\n", n, st.Processes[n], state)
	}
}

// probe asks the API server's /readyz as the admin, with the credentials
// testenv keeps in the state folder.
func probe(ctx context.Context, dir, url string) error {
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

func readState(dir string) (devState, error) {
	var st devState
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return st, nil
}

func writeState(dir string, st devState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

// running reports whether the recorded `loom dev up` process is alive: the
// PID exists and runs the same binary (so a reused PID does not count).
func (st devState) running() bool {
	if st.PID <= 0 || syscall.Kill(st.PID, 0) != nil {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", st.PID))
	// A binary rebuilt while it runs shows as "<path> (deleted)".
	return err != nil || st.Executable == "" || strings.TrimSuffix(exe, " (deleted)") == st.Executable
}

// devImport loads image archives (as loom build image --tarball or docker
// save write them) into every real node of the cluster that loom dev up
// runs in the state folder, with ctr, into the namespace kubelet uses.
func devImport(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loom dev import", flag.ContinueOnError)
	dir := stateDirFlag(fs)
	pos, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(out, "Usage: loom dev import [flags] FILE.tar...\n\nLoads image archives into the real nodes of loom dev up --real-nodes.\n\n%s", flagUsage(fs))
		return err
	}
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: loom dev import needs at least one image archive", errUsage)
	}
	st, err := readState(*dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !st.running()) {
		return fmt.Errorf("no dev cluster is running in %s", *dir)
	}
	if err != nil {
		return err
	}
	if len(st.RealNodes) == 0 {
		return fmt.Errorf("the dev cluster in %s has no real nodes (start it with loom dev up --real-nodes N); fake nodes run no image", *dir)
	}
	for _, file := range pos {
		for _, n := range st.RealNodes {
			cmd := exec.CommandContext(ctx, "ctr", "--address", n.ContainerdSocket, "--namespace", "k8s.io", "images", "import", file)
			b, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("import %s into %s: %w: %s", file, n.Name, err, strings.TrimSpace(string(b)))
			}
			fmt.Fprintf(out, "Imported %s into %s: %s\n", file, n.Name, strings.TrimSpace(string(b)))
		}
	}
	return nil
}
