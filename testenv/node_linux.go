//go:build linux

package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/internal/ociimage"
	"github.com/loom-k8s/loom/internal/pause"
	"github.com/loom-k8s/loom/internal/pki"
)

// cniPlugins are the CNI plugins real nodes use, from Debian's
// containernetworking-plugins.
var cniPlugins = []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"}

// checkRealNodeHost reports what this machine lacks for real nodes, as a
// *RealNodesUnavailableError, or nil.
func checkRealNodeHost() error {
	var missing []string
	install := false
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "unshare", "mount", "ip"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
			install = true
		}
	}
	for _, p := range cniPlugins {
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, p)
			install = true
		}
	}
	if _, err := exec.LookPath("go"); err != nil {
		missing = append(missing, "go (the Go toolchain, which builds the pause image)")
	}
	if len(cgroupHierarchies()) == 0 {
		missing = append(missing, "cgroups (nothing mounted under /sys/fs/cgroup)")
	}
	if len(missing) == 0 {
		return nil
	}
	e := &RealNodesUnavailableError{Missing: missing}
	if install {
		e.Install = nodeInstallHint
	}
	return e
}

// prepareRealNodeNetwork runs before kube-apiserver starts when
// Options.RealNodes is set: it records the env on the machine (see
// hostAcquire) and makes the env's bridge with its gateway address, on
// which kube-apiserver then listens, so that Pods reach it (the CNI bridge
// plugin adopts the bridge by its name).
func (e *Env) prepareRealNodeNetwork(ctx context.Context) error {
	rec, err := hostAcquire(e.Dir, e.opts.RealNodes, e.log)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.nodeRec = rec
	e.mu.Unlock()
	_, subnet, _ := net.ParseCIDR(rec.Subnet)
	gw := gatewayIP(subnet)
	ones, _ := subnet.Mask.Size()
	if err := runCmd(ctx, "ip", "link", "add", "name", rec.Bridge, "type", "bridge"); err != nil {
		return fmt.Errorf("testenv: create bridge %s: %w", rec.Bridge, err)
	}
	if err := runCmd(ctx, "ip", "addr", "add", gw.String()+"/"+strconv.Itoa(ones), "dev", rec.Bridge); err != nil {
		return fmt.Errorf("testenv: address bridge %s: %w", rec.Bridge, err)
	}
	if err := runCmd(ctx, "ip", "link", "set", rec.Bridge, "up"); err != nil {
		return fmt.Errorf("testenv: bring up bridge %s: %w", rec.Bridge, err)
	}
	return nil
}

// startRealNodes starts Options.RealNodes real nodes once the control plane
// runs on the env's bridge (see prepareRealNodeNetwork): it makes the
// env's cgroup, builds the pause image, lets kube-apiserver's kubelet
// client use the kubelet API, starts each node's containerd and kubelet,
// waits until every node is Ready, and starts kube-proxy (see
// startKubeProxy).
func (e *Env) startRealNodes(ctx context.Context, kubeletBin, kubeProxyBin string) error {
	count := e.opts.RealNodes
	e.mu.Lock()
	rec := e.nodeRec
	e.mu.Unlock()
	e.log.Info("starting real nodes", "count", count, "bridge", rec.Bridge, "subnet", rec.Subnet, "cgroup", rec.CgroupRoot)

	if err := makeCgroups(rec.CgroupRoot, count); err != nil {
		return err
	}

	pauseTar, err := e.buildPauseImage(ctx)
	if err != nil {
		return err
	}
	hc, err := e.HTTPClient()
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	if err := e.bindKubeletClient(ctx, hc); err != nil {
		return err
	}
	for i := range count {
		if err := e.startRealNode(ctx, i, rec, kubeletBin, pauseTar); err != nil {
			return err
		}
	}
	for _, n := range e.realNodesSnapshot() {
		if err := e.waitNodeReady(ctx, hc, n); err != nil {
			return err
		}
	}
	if rec.KubeProxy {
		return e.startKubeProxy(ctx, rec, kubeProxyBin)
	}
	e.log.Warn("another env on this machine runs kube-proxy (its nftables table is machine-wide): this env's Services do not route")
	return nil
}

// startKubeProxy runs one kube-proxy for the env, in nftables mode, as
// the first real node: it routes every Service's ClusterIP (among them
// the "kubernetes" Service, whose endpoint is kube-apiserver on the
// bridge) from Pods and from this machine. It leaves the machine's
// conntrack settings as they are, serves health and metrics on
// 127.0.0.1, and opens NodePorts on the bridge's address only. Its
// nftables tables ("kube-proxy" in the ip and ip6 families) are removed
// by cleanupNodeEnv.
func (e *Env) startKubeProxy(ctx context.Context, rec *nodeEnvRecord, bin string) error {
	_, subnet, _ := net.ParseCIDR(rec.Subnet)
	gw := gatewayIP(subnet)
	dir := e.path("kube-proxy")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("testenv: kube-proxy: %w", err)
	}
	// The built-in binding system:node-proxier grants this user what
	// kube-proxy reads.
	cert, key, err := issue(e.ca, pki.Request{CommonName: "system:kube-proxy"})
	if err != nil {
		return fmt.Errorf("testenv: kube-proxy client certificate: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	healthz, metrics := ports[0], ports[1]
	kc := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: nftables
hostnameOverride: %q
clusterCIDR: %q
healthzBindAddress: "127.0.0.1:%d"
metricsBindAddress: "127.0.0.1:%d"
nodePortAddresses: [%q]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`, kc, RealNodeName(0), rec.Subnet, healthz, metrics, gw.String()+"/32")
	if err := writeFiles(map[string][]byte{
		kc:                                kubeconfig(e.URL, e.CAPEM, "system:kube-proxy", cert, key),
		filepath.Join(dir, "config.yaml"): []byte(cfg),
	}); err != nil {
		return err
	}
	p, err := e.addProc("kube-proxy", bin, []string{"--config=" + filepath.Join(dir, "config.yaml"), "--v=1"})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.kubeProxy = p
	e.mu.Unlock()
	// Up once its /healthz answers 200 (its rules synced).
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	return e.waitFor(ctx, "kube-proxy /healthz", p, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz), nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("/healthz: %s", resp.Status)
		}
		return true, nil
	})
}

// kubeProxyTables are the nftables tables kube-proxy makes in nftables
// mode, as "family name".
var kubeProxyTables = []string{"ip kube-proxy", "ip6 kube-proxy"}

func (e *Env) realNodesSnapshot() []*realNode {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*realNode(nil), e.realNodes...)
}

// nodeDir is real node i's folder in the state folder. It is short
// because containerd's socket lives in it, and a socket's path may not be
// longer than 107 bytes.
func nodeDir(envDir string, i int) string { return filepath.Join(envDir, "nodes", strconv.Itoa(i)) }

func nodeSocket(envDir string, i int) string {
	return filepath.Join(nodeDir(envDir, i), "containerd.sock")
}

// startRealNode writes node i's configuration and starts its containerd
// and kubelet.
func (e *Env) startRealNode(ctx context.Context, i int, rec *nodeEnvRecord, kubeletBin, pauseTar string) error {
	nodeName := RealNodeName(i)
	dir := nodeDir(e.Dir, i)
	_, subnet, _ := net.ParseCIDR(rec.Subnet)
	gw := gatewayIP(subnet)
	first, last := podRange(subnet, i)
	n := &realNode{
		RealNode: RealNode{
			Name: nodeName, IP: gw.String(), Bridge: rec.Bridge, Subnet: rec.Subnet,
			PodIPRange: first.String() + "-" + last.String(), ContainerdSocket: nodeSocket(e.Dir, i),
		},
		dir: dir,
	}
	e.mu.Lock()
	e.realNodes = append(e.realNodes, n)
	e.mu.Unlock()

	p := func(parts ...string) string { return filepath.Join(append([]string{dir}, parts...)...) }
	// The CNI plugins' allocations are per env: a kept state folder
	// starts afresh, as its bridge and subnet are new.
	_ = os.RemoveAll(p("cni", "ipam"))
	for _, d := range []string{p("containerd", "root"), p("containerd", "state"), p("runc"), p("cni", "net.d"), p("cni", "ipam"),
		p("kubelet", "root"), p("kubelet", "pod-logs"), p("kubelet", "volume-plugins"), p("kubelet", "sysctl")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("testenv: %s: %w", nodeName, err)
		}
	}
	if len(n.ContainerdSocket) > 100 {
		return fmt.Errorf("testenv: %s: containerd's socket path %s is too long for a Unix socket; use a shorter state folder", nodeName, n.ContainerdSocket)
	}
	cni, err := cniConfig("loom-"+rec.ID, rec.Bridge, rec.Subnet, gw.String(), first.String(), last.String(), p("cni", "ipam"))
	if err != nil {
		return err
	}
	files := map[string][]byte{
		p("containerd", "config.toml"): []byte(containerdConfig(p("containerd", "root"), p("containerd", "state"), n.ContainerdSocket,
			p("runc"), p("cni", "net.d"), pause.Image)),
		p("cni", "net.d", "10-loom.conflist"): cni,
	}
	if err := writeFiles(files); err != nil {
		return err
	}

	// containerd, and its pause image.
	cd, err := exec.LookPath("containerd")
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	_ = os.Remove(n.ContainerdSocket)
	n.containerd, err = e.addProc(nodeName+"-containerd", cd, []string{"--config", p("containerd", "config.toml")})
	if err != nil {
		return err
	}
	cri, err := newCRIClient(n.ContainerdSocket)
	if err != nil {
		return err
	}
	defer cri.Close()
	if err := e.waitFor(ctx, nodeName+" containerd", n.containerd, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := cri.Version(cctx)
		return err == nil, err
	}); err != nil {
		return err
	}
	if err := ctrImport(ctx, n.ContainerdSocket, pauseTar); err != nil {
		return fmt.Errorf("testenv: %s: import the pause image: %w", nodeName, err)
	}

	// kubelet's credentials and configuration.
	servingCert, servingKey, err := issue(e.ca, pki.Request{CommonName: "system:node:" + nodeName, Server: true,
		DNSNames: []string{nodeName}, IPs: []net.IP{gw}})
	if err != nil {
		return fmt.Errorf("testenv: %s serving certificate: %w", nodeName, err)
	}
	clientCert, clientKey, err := issue(e.ca, pki.Request{CommonName: "system:node:" + nodeName, Organizations: []string{"system:nodes"}})
	if err != nil {
		return fmt.Errorf("testenv: %s client certificate: %w", nodeName, err)
	}
	port, err := freePortOn(gw)
	if err != nil {
		return err
	}
	n.KubeletPort = port
	cfg, err := kubeletConfig(kubeletConfigParams{
		Address: gw.String(), Port: port, ClientCAFile: e.path("ca.crt"),
		CertFile: p("kubelet", "kubelet.crt"), KeyFile: p("kubelet", "kubelet.key"),
		CgroupRoot: rec.CgroupRoot + "/" + strconv.Itoa(i), Socket: n.ContainerdSocket,
		PodLogsDir: p("kubelet", "pod-logs"), VolumePlugin: p("kubelet", "volume-plugins"),
	})
	if err != nil {
		return err
	}
	files = map[string][]byte{
		p("kubelet", "kubelet.crt"): servingCert,
		p("kubelet", "kubelet.key"): servingKey,
		p("kubelet", "kubeconfig"):  kubeconfig(e.URL, e.CAPEM, "system:node:"+nodeName, clientCert, clientKey),
		p("kubelet", "config.yaml"): cfg,
	}
	for _, s := range sysctlsKubeletSets {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return fmt.Errorf("testenv: %s: read sysctl: %w", nodeName, err)
		}
		files[p("kubelet", "sysctl", strings.ReplaceAll(s, "/", "_"))] = v
	}
	if err := writeFiles(files); err != nil {
		return err
	}

	// kubelet's root folder is a shared mount, so that the volumes kubelet
	// mounts in its own mount namespace reach containerd's.
	root := p("kubelet", "root")
	if err := syscall.Mount(root, root, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("testenv: %s: bind-mount kubelet's root folder: %w", nodeName, err)
	}
	if err := syscall.Mount("", root, "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("testenv: %s: share kubelet's root folder: %w", nodeName, err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	args := []string{"--mount", "--propagation", "unchanged", "--", "/bin/sh", "-c", kubeletRunScript(), "sh", p("kubelet", "sysctl"),
		kubeletBin,
		"--config=" + p("kubelet", "config.yaml"),
		"--kubeconfig=" + p("kubelet", "kubeconfig"),
		"--root-dir=" + root,
		"--hostname-override=" + nodeName,
		"--node-ip=" + gw.String(),
		"--node-labels=type=real",
		"--v=1",
	}
	n.kubelet, err = e.addProc(nodeName+"-kubelet", unshare, args)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.RealNodes = append(e.RealNodes, n.RealNode)
	e.mu.Unlock()
	return nil
}

// waitNodeReady waits until the node has registered and is Ready.
func (e *Env) waitNodeReady(ctx context.Context, hc *http.Client, n *realNode) error {
	return e.waitFor(ctx, n.Name+" to be Ready", n.kubelet, func(ctx context.Context) (bool, error) {
		var node corev1.Node
		if err := e.getJSON(ctx, hc, "/api/v1/nodes/"+n.Name, &node); err != nil {
			return false, err
		}
		return nodeReady(node)
	})
}

// bindKubeletClient lets kube-apiserver's kubelet client (the user of
// kubelet-client.crt) use every kubelet API (logs, exec, port-forward,
// metrics), as kubeadm does, through the built-in role
// system:kubelet-api-admin.
func (e *Env) bindKubeletClient(ctx context.Context, hc *http.Client) error {
	crb := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRoleBinding",
		"metadata":   map[string]any{"name": "loom-testenv:kube-apiserver-kubelet-client"},
		"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
		"subjects":   []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kubeletClientUser}},
	}
	b, _ := json.Marshal(crb)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("testenv: bind the kubelet client role: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("testenv: bind the kubelet client role: %s", resp.Status)
	}
	return nil
}

// buildPauseImage builds the pause program and writes its image as an
// archive in the state folder, tagged pause.Image.
func (e *Env) buildPauseImage(ctx context.Context) (string, error) {
	dir := e.path("images")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	bin, err := pause.Build(ctx, dir, runtime.GOARCH)
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	img, err := ociimage.Assemble(exe, nil, ociimage.Options{})
	if err != nil {
		return "", fmt.Errorf("testenv: pause image: %w", err)
	}
	tag, err := name.NewTag(pause.Image)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "pause.tar")
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return "", fmt.Errorf("testenv: pause image: %w", err)
	}
	return out, nil
}

// stopRealNodes takes the real nodes down: kubelet first (so it starts no
// Pod again), then every Pod sandbox through containerd (which has the CNI
// plugins release each Pod's network and unmounts its files), then
// containerd; then whatever is left of the env on the machine (see
// cleanupNodeEnv), and the machine-wide state if no other env runs real
// nodes (see hostRelease).
func (e *Env) stopRealNodes() error {
	e.mu.Lock()
	nodes, rec, kp := e.realNodes, e.nodeRec, e.kubeProxy
	e.realNodes, e.nodeRec, e.kubeProxy = nil, nil, nil
	e.mu.Unlock()
	if rec == nil {
		return nil
	}
	start := time.Now()
	for _, n := range nodes {
		if n.kubelet != nil {
			n.kubelet.stop(5 * time.Second)
		}
	}
	e.log.Info("stopped kubelets", "took", time.Since(start))
	// kube-proxy before its tables go, or it would write them again.
	if kp != nil {
		kp.stop(5 * time.Second)
	}
	var errs []error
	for _, n := range nodes {
		if n.containerd == nil {
			continue
		}
		select {
		case <-n.containerd.exited():
			continue
		default:
		}
		if err := removeSandboxes(n.ContainerdSocket); err != nil {
			e.log.Warn("remove Pod sandboxes", "node", n.Name, "err", err)
		}
		n.containerd.stop(10 * time.Second)
	}
	e.log.Info("stopped Pods and containerd", "took", time.Since(start))
	if err := cleanupNodeEnv(rec, e.log); err != nil {
		errs = append(errs, err)
	}
	if err := hostRelease(rec, e.log); err != nil {
		errs = append(errs, err)
	}
	e.log.Info("removed real nodes", "took", time.Since(start))
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every Pod sandbox of one containerd.
func removeSandboxes(socket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cri, err := newCRIClient(socket)
	if err != nil {
		return err
	}
	defer cri.Close()
	ids, err := cri.PodSandboxIDs(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := cri.StopPodSandbox(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := cri.RemovePodSandbox(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanupNodeEnv removes what an env's real nodes left on the machine,
// after kubelet and containerd have stopped or died: every process in the
// env's cgroups (containers, pause processes) and every containerd shim
// of its sockets, every mount under its state folder, its bridge and any
// veth still attached to it, and its cgroups in every hierarchy.
func cleanupNodeEnv(rec *nodeEnvRecord, log interface{ Warn(string, ...any) }) error {
	var errs []error
	if rec.KubeProxy {
		tables := nftTables()
		for _, t := range kubeProxyTables {
			if !slices.Contains(tables, t) {
				continue
			}
			fam, name, _ := strings.Cut(t, " ")
			if err := runCmd(context.Background(), "nft", "delete", "table", fam, name); err != nil {
				errs = append(errs, fmt.Errorf("testenv: remove kube-proxy's rules: %w", err))
			}
		}
	}
	killShims(rec.Sockets)
	if err := killCgroupTree(rec.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(rec.Dir); err != nil {
		errs = append(errs, err)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", rec.Bridge)); err == nil {
		ports, _ := os.ReadDir(filepath.Join("/sys/class/net", rec.Bridge, "brif"))
		for _, p := range ports {
			_ = runCmd(context.Background(), "ip", "link", "del", p.Name())
		}
		if err := runCmd(context.Background(), "ip", "link", "del", rec.Bridge); err != nil {
			errs = append(errs, fmt.Errorf("testenv: delete bridge %s: %w", rec.Bridge, err))
		}
	}
	if err := removeCgroups(rec.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	// kubelet links each container's log into /var/log/containers; the
	// links into this env's folder go with it.
	if ents, err := os.ReadDir(containerLogLinks); err == nil {
		for _, ent := range ents {
			p := filepath.Join(containerLogLinks, ent.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, rec.Dir+"/") {
				_ = os.Remove(p)
			}
		}
	}
	return errors.Join(errs...)
}

// containerLogLinks is where kubelet links container logs, whatever its
// configuration.
const containerLogLinks = "/var/log/containers"

// runCmd runs a command and returns its output in the error.
func runCmd(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// freePortOn returns a TCP port on ip that was free a moment ago.
func freePortOn(ip net.IP) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return 0, fmt.Errorf("testenv: find a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// gatewayIP is the first address of subnet: the bridge's.
func gatewayIP(subnet *net.IPNet) net.IP {
	ip := slices.Clone(subnet.IP.To4())
	ip[3] = 1
	return ip
}

// podRange is node i's share of the env's /16: x.y.(i+1).1 to x.y.(i+1).254.
func podRange(subnet *net.IPNet, i int) (first, last net.IP) {
	first, last = slices.Clone(subnet.IP.To4()), slices.Clone(subnet.IP.To4())
	first[2], first[3] = byte(i+1), 1
	last[2], last[3] = byte(i+1), 254
	return first, last
}

// ---- cgroups

// cgroupHierarchies returns the mount points of every cgroup hierarchy
// (v1 and v2).
func cgroupHierarchies() []string {
	var mps []string
	for _, m := range mounts() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			mps = append(mps, m.point)
		}
	}
	return mps
}

// makeCgroups creates the env's cgroup, and one per node in it, in every
// hierarchy: kubelet wants its cgroup root to exist. In the cpuset
// hierarchy, the new cgroups get their parent's CPUs and memory nodes.
func makeCgroups(root string, nodes int) error {
	for _, h := range cgroupHierarchies() {
		dirs := []string{filepath.Join(h, root)}
		for i := range nodes {
			dirs = append(dirs, filepath.Join(h, root, strconv.Itoa(i)))
		}
		for _, d := range dirs {
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("testenv: create cgroup %s: %w", d, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				cur, err := os.ReadFile(filepath.Join(d, f))
				if err != nil || len(bytes.TrimSpace(cur)) > 0 {
					continue
				}
				parent, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
				if err == nil {
					_ = os.WriteFile(filepath.Join(d, f), parent, 0o644)
				}
			}
		}
	}
	return nil
}

// cgroupDirs lists a cgroup and every cgroup below it, in every
// hierarchy, children before parents.
func cgroupDirs(root string) []string {
	var dirs []string
	for _, h := range cgroupHierarchies() {
		top := filepath.Join(h, root)
		var sub []string
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				sub = append(sub, path)
			}
			return nil
		})
		slices.Reverse(sub)
		dirs = append(dirs, sub...)
	}
	return dirs
}

// killCgroupTree kills every process in a cgroup tree and waits until the
// tree is empty.
func killCgroupTree(root string) error {
	if root == "" || root == "/" {
		return nil
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := 0
		for _, d := range cgroupDirs(root) {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 && alive(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					left++
				}
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: %d processes still in cgroup %s", left, root)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroups removes a cgroup tree, children first, retrying while the
// kernel still counts exiting processes in it.
func removeCgroups(root string) error {
	if root == "" || root == "/" {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var last error
		for _, d := range cgroupDirs(root) {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				last = fmt.Errorf("testenv: remove cgroup %s: %w", d, err)
			}
		}
		if last == nil || time.Now().After(deadline) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killShims kills the containerd shims serving one of the given
// containerd sockets (they outlive containerd on purpose).
func killShims(sockets []string) {
	if len(sockets) == 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		for _, ent := range entries {
			pid, err := strconv.Atoi(ent.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
			if err != nil || !bytes.Contains(b, []byte("containerd-shim")) {
				continue
			}
			args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
			for j := 0; j+1 < len(args); j++ {
				if args[j] == "-address" && slices.Contains(sockets, args[j+1]) && alive(pid) {
					pids = append(pids, pid)
				}
			}
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- mounts

type mountEntry struct{ point, fstype string }

// mounts reads this process's mount table.
func mounts() []mountEntry {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		// The fields after the optional ones start after "-".
		i := slices.Index(fields, "-")
		if i < 0 || i+1 >= len(fields) {
			continue
		}
		ms = append(ms, mountEntry{point: unescapeMount(fields[4]), fstype: fields[i+1]})
	}
	return ms
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	if dir == "" || dir == "/" {
		return nil
	}
	dir = filepath.Clean(dir)
	var last error
	for range 10 {
		var points []string
		for _, m := range mounts() {
			if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
				points = append(points, m.point)
			}
		}
		if len(points) == 0 {
			return nil
		}
		sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				last = fmt.Errorf("testenv: unmount %s: %w", p, err)
			}
		}
	}
	return last
}

// ---- machine-wide state

// The machine-wide record of the envs that run real nodes, and of the
// machine's state before the first of them started. It lives in /run,
// which a reboot empties, as the state it describes.
const (
	hostStateFile = "/run/loom-testenv-nodes.json"
	hostLockFile  = "/run/loom-testenv-nodes.lock"
)

// hostPaths are the places outside the state folder that kubelet,
// containerd and the CNI plugins write to whatever they are configured
// with: kubelet's device-plugin socket folder and its log links,
// containerd's shim sockets and network namespaces, the CNI plugins'
// result cache. The ones that did not exist before the first env are
// removed after the last.
var hostPaths = []string{"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/log/containers", "/var/lib/cni", "/run/containerd", "/run/netns"}

type hostState struct {
	Envs     []*nodeEnvRecord `json:"envs"`
	Baseline hostBaseline     `json:"baseline"`
}

// hostBaseline is the machine's state before the first env started.
type hostBaseline struct {
	IPForward string   `json:"ipForward"`
	Absent    []string `json:"absent"`
	NetNS     []string `json:"netns"`
	NFTTables []string `json:"nftTables"`
}

// withHostLock runs fn holding the machine-wide lock.
func withHostLock(fn func() error) error {
	for {
		f, err := os.OpenFile(hostLockFile, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return fmt.Errorf("testenv: real nodes' lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return fmt.Errorf("testenv: real nodes' lock: %w", err)
		}
		// The last holder removes the file: make sure the lock is on the
		// file that is still there.
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(hostLockFile, &now) == nil && held.Ino == now.Ino {
			err := fn()
			f.Close()
			return err
		}
		f.Close()
	}
}

func readHostState() (*hostState, error) {
	b, err := os.ReadFile(hostStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st hostState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", hostStateFile, err)
	}
	return &st, nil
}

func writeHostState(st *hostState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := hostStateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	return os.Rename(tmp, hostStateFile)
}

// ownerAlive reports whether the "<pid>:<start time>" process runs.
func ownerAlive(owner string) bool {
	pidStr, start, _ := strings.Cut(owner, ":")
	pid, _ := strconv.Atoi(pidStr)
	return pid > 0 && startTime(pid) == start
}

// hostAcquire records a new env with real nodes on the machine: it takes
// the machine's baseline if no other env runs, cleans up after envs whose
// process died, and picks the env's ID, bridge and subnet (a /16 in 10/8
// that no interface, route or other env uses).
func hostAcquire(dir string, nodes int, log interface{ Warn(string, ...any) }) (*nodeEnvRecord, error) {
	var rec *nodeEnvRecord
	err := withHostLock(func() error {
		st, err := readHostState()
		if err != nil {
			return err
		}
		st = sweepDeadEnvs(st, log)
		if st == nil {
			st = &hostState{Baseline: takeBaseline()}
		}
		id := make([]byte, 4)
		if _, err := rand.Read(id); err != nil {
			return err
		}
		subnet, err := pickSubnet(st.Envs)
		if err != nil {
			return err
		}
		h := hex.EncodeToString(id)
		rec = &nodeEnvRecord{Owner: selfIdentity(), Dir: filepath.Clean(dir), ID: h, Bridge: "loom" + h, Subnet: subnet, CgroupRoot: "/loom-" + h}
		for i := range nodes {
			rec.Sockets = append(rec.Sockets, nodeSocket(rec.Dir, i))
		}
		rec.KubeProxy = !slices.ContainsFunc(st.Envs, func(r *nodeEnvRecord) bool { return r.KubeProxy })
		st.Envs = append(st.Envs, rec)
		return writeHostState(st)
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: record real nodes: %w", err)
	}
	return rec, nil
}

// hostRelease removes an env's record, and restores the machine's
// baseline when it was the last.
func hostRelease(rec *nodeEnvRecord, log interface{ Warn(string, ...any) }) error {
	return withHostLock(func() error {
		st, err := readHostState()
		if err != nil || st == nil {
			return err
		}
		st.Envs = slices.DeleteFunc(st.Envs, func(r *nodeEnvRecord) bool { return r.ID == rec.ID && r.Dir == rec.Dir })
		if len(st.Envs) > 0 {
			return writeHostState(st)
		}
		err = restoreBaseline(st.Baseline, log)
		_ = os.Remove(hostStateFile)
		_ = os.Remove(hostLockFile)
		return err
	})
}

// sweepStaleRealNodes cleans up after envs with real nodes whose process
// died without Stop (a test binary killed with SIGKILL). kubelet and
// containerd die with their parent; the containers, the mounts, the
// bridge and the cgroups do not.
func sweepStaleRealNodes(log interface{ Warn(string, ...any) }) {
	if _, err := os.Stat(hostStateFile); err != nil {
		return
	}
	_ = withHostLock(func() error {
		st, err := readHostState()
		if err != nil || st == nil {
			return err
		}
		if st = sweepDeadEnvs(st, log); st == nil {
			_ = os.Remove(hostStateFile)
			_ = os.Remove(hostLockFile)
			return nil
		}
		return writeHostState(st)
	})
}

// sweepDeadEnvs cleans up the envs of st whose process is gone. When none
// is left it restores the baseline and returns nil.
func sweepDeadEnvs(st *hostState, log interface{ Warn(string, ...any) }) *hostState {
	if st == nil {
		return nil
	}
	var live []*nodeEnvRecord
	for _, r := range st.Envs {
		if ownerAlive(r.Owner) {
			live = append(live, r)
			continue
		}
		log.Warn("cleaning up real nodes left by an earlier run", "dir", r.Dir, "bridge", r.Bridge)
		if err := cleanupNodeEnv(r, log); err != nil {
			log.Warn("clean up real nodes", "dir", r.Dir, "err", err)
		}
	}
	st.Envs = live
	if len(live) > 0 {
		return st
	}
	if err := restoreBaseline(st.Baseline, log); err != nil {
		log.Warn("restore the machine's state", "err", err)
	}
	return nil
}

func takeBaseline() hostBaseline {
	var b hostBaseline
	if v, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil {
		b.IPForward = strings.TrimSpace(string(v))
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			b.Absent = append(b.Absent, p)
		}
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			b.NetNS = append(b.NetNS, e.Name())
		}
	}
	b.NFTTables = nftTables()
	return b
}

// restoreBaseline puts the machine back as it was before the first env:
// network namespaces that containerd left are unmounted and removed, the
// folders that did not exist are removed, nftables tables that appeared
// and hold only kubelet's or the CNI plugins' chains are deleted, and
// net.ipv4.ip_forward (which the bridge plugin turns on) is set back.
func restoreBaseline(b hostBaseline, log interface{ Warn(string, ...any) }) error {
	var errs []error
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if slices.Contains(b.NetNS, e.Name()) {
				continue
			}
			p := filepath.Join("/run/netns", e.Name())
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
			if err := os.Remove(p); err != nil {
				errs = append(errs, fmt.Errorf("testenv: remove %s: %w", p, err))
			}
		}
	}
	for _, p := range b.Absent {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		_ = unmountUnder(p)
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("testenv: remove %s: %w", p, err))
		}
	}
	before := map[string]bool{}
	for _, t := range b.NFTTables {
		before[t] = true
	}
	for _, t := range nftTables() {
		if before[t] {
			continue
		}
		fam, tname, _ := strings.Cut(t, " ")
		if !nftTableIsKubeOnly(fam, tname) {
			log.Warn("leaving an nftables table that appeared while real nodes ran, as it holds rules of others", "table", t)
			continue
		}
		if err := runCmd(context.Background(), "nft", "delete", "table", fam, tname); err != nil {
			errs = append(errs, err)
		}
	}
	if b.IPForward != "" {
		if v, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil && strings.TrimSpace(string(v)) != b.IPForward {
			if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(b.IPForward+"\n"), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("testenv: restore net.ipv4.ip_forward: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// nftTables lists the nftables tables as "family name", or nothing
// without nft.
func nftTables() []string {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var ts []string
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "table "); ok {
			ts = append(ts, rest)
		}
	}
	return ts
}

// nftTableIsKubeOnly reports whether every rule of a table is in, or
// jumps to, a KUBE- or CNI- chain: a table that kubelet or a CNI plugin
// made (through iptables-nft), with nobody else's rules in it.
func nftTableIsKubeOnly(fam, table string) bool {
	out, err := exec.Command("nft", "list", "table", fam, table).Output()
	if err != nil {
		return false
	}
	chain := ""
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || l == "}" || strings.HasPrefix(l, "table "):
		case strings.HasPrefix(l, "chain "):
			chain = strings.TrimSuffix(strings.TrimPrefix(l, "chain "), " {")
		case strings.HasPrefix(l, "type ") || strings.HasPrefix(l, "policy "):
		case strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-"):
		case strings.Contains(l, "KUBE-") || strings.Contains(l, "CNI-"):
		default:
			return false
		}
	}
	return true
}

// pickSubnet picks a /16 in 10.64.0.0-10.253.0.0 that overlaps no
// address or route of this machine and no other env's.
func pickSubnet(others []*nodeEnvRecord) (string, error) {
	var used []*net.IPNet
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				used = append(used, n)
			}
		}
	}
	used = append(used, ipv4Routes()...)
	for _, r := range others {
		if _, n, err := net.ParseCIDR(r.Subnet); err == nil {
			used = append(used, n)
		}
	}
	b := make([]byte, 1)
	_, _ = rand.Read(b)
	start := int(b[0]) % 190
	for k := range 190 {
		second := 64 + (start+k)%190
		_, cand, _ := net.ParseCIDR(fmt.Sprintf("10.%d.0.0/16", second))
		if !slices.ContainsFunc(used, func(n *net.IPNet) bool { return n.Contains(cand.IP) || cand.Contains(n.IP) }) {
			return cand.String(), nil
		}
	}
	return "", errors.New("testenv: no free /16 in 10.64.0.0/10 for the real nodes' bridge")
}

// ipv4Routes reads the main IPv4 routing table, without the default route.
func ipv4Routes() []*net.IPNet {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	var ns []*net.IPNet
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 8 {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil || mask == 0 {
			continue
		}
		// /proc/net/route prints addresses in host (little-endian) order.
		d := uint32(dst)
		m := uint32(mask)
		ns = append(ns, &net.IPNet{
			IP:   net.IPv4(byte(d), byte(d>>8), byte(d>>16), byte(d>>24)).To4(),
			Mask: net.IPv4Mask(byte(m), byte(m>>8), byte(m>>16), byte(m>>24)),
		})
	}
	return ns
}
