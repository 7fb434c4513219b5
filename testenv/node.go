package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/loom-k8s/loom/internal/pki"
)

// RealNodeName returns the name of real node i (0-based).
func RealNodeName(i int) string { return fmt.Sprintf("real-node-%d", i) }

// RealNode describes one real node (Options.RealNodes): a kubelet and its
// own containerd, run on this machine.
type RealNode struct {
	// Name is the Node's name.
	Name string
	// IP is the node's InternalIP: the address of the env's bridge on this
	// machine, where kubelet serves its API on KubeletPort. Every real node
	// of an env has the same IP.
	IP          string
	KubeletPort int
	// Bridge is the Linux bridge the Pods of every real node of the env are
	// attached to; Subnet is its network (such as 10.77.0.0/16). This
	// machine reaches Pod IPs through it.
	Bridge, Subnet string
	// PodIPRange is the part of Subnet this node gives its Pods, as
	// "first-last".
	PodIPRange string
	// ContainerdSocket is the node's containerd socket (ctr --address).
	ContainerdSocket string
}

// ErrRealNodesUnavailable is returned (wrapped in a
// *RealNodesUnavailableError) by Start when Options.RealNodes is set but
// this machine cannot run real nodes. Fake nodes (Options.Nodes) do not
// need anything it names.
var ErrRealNodesUnavailable = errors.New("real nodes unavailable")

// RealNodesUnavailableError says why real nodes cannot run here: what is
// missing, and how to install it.
type RealNodesUnavailableError struct {
	// Missing lists what was looked for and not found: programs (such as
	// "containerd" or "/usr/lib/cni/bridge"), "root", "linux" or
	// "cgroups".
	Missing []string
	// Install is the command that installs the missing programs, when that
	// is the remedy.
	Install string
}

// nodePackages are the Debian packages real nodes need.
const nodePackages = "containerd runc containernetworking-plugins iptables nftables conntrack iproute2 util-linux"

// nodeInstallHint is the command that installs them.
const nodeInstallHint = "apt-get install -y " + nodePackages + " (or, in a Loom checkout, as root: bash tools/node-deps.sh)"

func (e *RealNodesUnavailableError) Error() string {
	msg := "testenv: real nodes need " + strings.Join(e.Missing, ", ") + ", which this machine lacks"
	if e.Install != "" {
		msg += "; install with: " + e.Install
	}
	return msg + "; fake nodes (Options.Nodes) need none of it"
}

func (e *RealNodesUnavailableError) Unwrap() error { return ErrRealNodesUnavailable }

// ImportImage makes img available to every real node as ref (such as
// "example.com/app:dev"; a reference without a tag means ":latest"), by
// writing it as an image archive in the state folder and importing it into
// each node's containerd. Real nodes never pull: Pods must use images
// imported this way (or built into the node, as the pause image is), with
// imagePullPolicy Never or IfNotPresent.
func (e *Env) ImportImage(ctx context.Context, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("testenv: import image: %w", err)
	}
	dir := e.path("images")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("testenv: import image: %w", err)
	}
	f, err := os.CreateTemp(dir, "image-*.tar")
	if err != nil {
		return fmt.Errorf("testenv: import image: %w", err)
	}
	path := f.Name()
	defer os.Remove(path)
	if err := tarball.Write(tag, img, f); err != nil {
		f.Close()
		return fmt.Errorf("testenv: import image %s: write archive: %w", ref, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("testenv: import image %s: %w", ref, err)
	}
	return e.ImportImageTarball(ctx, path)
}

// ImportImageTarball imports an image archive (a `docker save` tarball,
// as go-containerregistry's tarball package writes, or an OCI layout in a
// tar file) into every real node's containerd, under the names the archive
// carries.
func (e *Env) ImportImageTarball(ctx context.Context, path string) error {
	e.mu.Lock()
	nodes := append([]RealNode(nil), e.RealNodes...)
	e.mu.Unlock()
	if len(nodes) == 0 {
		return errors.New("testenv: no real nodes to import an image into (set Options.RealNodes)")
	}
	for _, n := range nodes {
		if err := ctrImport(ctx, n.ContainerdSocket, path); err != nil {
			return fmt.Errorf("testenv: import %s into %s: %w", filepath.Base(path), n.Name, err)
		}
	}
	return nil
}

// ctrImport runs ctr images import against one containerd, in the
// namespace the CRI plugin (and so kubelet) uses.
func ctrImport(ctx context.Context, socket, path string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", socket, "--namespace", "k8s.io", "images", "import", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ctr images import: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// sysctlsKubeletSets are the kernel settings kubelet writes at start when
// they differ from what it wants (it has no mode that only warns). Real
// nodes run kubelet with each of them covered by a file of its own, so the
// machine's values stay as they are.
var sysctlsKubeletSets = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// kubeletRunScript is run by sh in kubelet's own mount namespace (made by
// unshare with the propagation of every mount left as it is, so that
// kubelet's root folder stays shared with containerd): it keeps /proc from
// passing mounts back to the machine, covers each sysctl kubelet sets with
// a file from the folder in $1 (named with "_" for "/"), and then runs
// kubelet (the rest of the arguments).
func kubeletRunScript() string {
	return `set -e
dir=$1; shift
mount --make-rslave /proc
for s in ` + strings.Join(sysctlsKubeletSets, " ") + `; do
  mount --bind "$dir/$(echo "$s" | tr / _)" "/proc/sys/$s"
done
exec "$@"
`
}

// containerdConfig renders the configuration of a real node's containerd:
// everything it keeps under the node's folder, the overlayfs snapshotter,
// cgroupfs, the CNI plugins of /usr/lib/cni with a configuration folder of
// its own, the locally built pause image as sandbox image, and
// restrict_oom_score_adj, without which no sandbox starts where the
// kernel refuses to lower an OOM score (as in many VMs and containers).
func containerdConfig(root, state, socket, runcRoot, cniConfDir, sandboxImage string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.internal.v1.opt"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
    max_conf_num = 1
`, root, state, socket, socket+".ttrpc", sandboxImage, runcRoot, cniConfDir)
}

// kubeletConfigParams are the values of a real node's kubelet configuration.
type kubeletConfigParams struct {
	Address      string
	Port         int
	ClientCAFile string
	CertFile     string
	KeyFile      string
	CgroupRoot   string
	Socket       string
	PodLogsDir   string
	VolumePlugin string
}

// kubeletConfig renders a KubeletConfiguration for a node that shares
// this machine with the developer's own work: cgroupfs under a cgroup of
// the env's own, cgroup v1 accepted, swap tolerated, the private
// containerd, private folders, the API served with a certificate from the
// cluster CA and authorized by kube-apiserver, no iptables chains, no
// eviction or image garbage collection on a full disk.
func kubeletConfig(p kubeletConfigParams) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":   "kubelet.config.k8s.io/v1beta1",
		"kind":         "KubeletConfiguration",
		"address":      p.Address,
		"port":         p.Port,
		"readOnlyPort": 0,
		"healthzPort":  0,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": p.ClientCAFile},
		},
		"authorization":            map[string]any{"mode": "Webhook"},
		"tlsCertFile":              p.CertFile,
		"tlsPrivateKeyFile":        p.KeyFile,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               p.CgroupRoot,
		"cgroupsPerQOS":            true,
		"enforceNodeAllocatable":   []string{"pods"},
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"containerRuntimeEndpoint": "unix://" + p.Socket,
		"imageServiceEndpoint":     "unix://" + p.Socket,
		"podLogsDir":               p.PodLogsDir,
		"volumePluginDir":          p.VolumePlugin,
		"makeIPTablesUtilChains":   false,
		"protectKernelDefaults":    false,
		"clusterDomain":            "cluster.local",
		"serializeImagePulls":      false,
		"evictionHard": map[string]string{
			"nodefs.available":   "0%",
			"nodefs.inodesFree":  "0%",
			"imagefs.available":  "0%",
			"imagefs.inodesFree": "0%",
		},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// cniConfig renders the CNI network of one real node: the env's bridge,
// with the node's Pods given addresses from first to last in subnet, the
// bridge's address as their gateway, and no masquerading.
func cniConfig(network, bridge, subnet, gateway, first, last, ipamDir string) ([]byte, error) {
	cfg := map[string]any{
		"cniVersion": "1.0.0",
		"name":       network,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      bridge,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": ipamDir,
				"ranges": [][]map[string]string{{{
					"subnet": subnet, "rangeStart": first, "rangeEnd": last, "gateway": gateway,
				}}},
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// realNode is the running state of one real node.
type realNode struct {
	RealNode
	dir        string
	containerd *proc
	kubelet    *proc
}

// nodeEnvRecord is what an env with real nodes made on the machine outside
// its processes, recorded machine-wide (see hostAcquire) so that Stop, or
// a later Start after the process died, can take it down.
type nodeEnvRecord struct {
	Owner      string   `json:"owner"` // "<pid>:<start time>" of the process that runs the env
	Dir        string   `json:"dir"`   // the state folder
	ID         string   `json:"id"`
	Bridge     string   `json:"bridge"`
	Subnet     string   `json:"subnet"`
	CgroupRoot string   `json:"cgroupRoot"`
	Sockets    []string `json:"sockets"` // containerd sockets, to find their shims
	// KubeProxy is set when the env runs kube-proxy, whose nftables tables
	// are machine-wide: one env at a time does.
	KubeProxy bool `json:"kubeProxy,omitempty"`
}

// kubeletClientUser is the user kube-apiserver authenticates as to
// kubelets (kubelet-client.crt), for logs, exec, attach and port-forward.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// writeKubeletClientPKI issues kube-apiserver's client certificate for
// kubelets.
func (e *Env) writeKubeletClientPKI() error {
	cert, key, err := issue(e.ca, pki.Request{CommonName: kubeletClientUser})
	if err != nil {
		return fmt.Errorf("testenv: kubelet client certificate: %w", err)
	}
	return writeFiles(map[string][]byte{e.path("kubelet-client.crt"): cert, e.path("kubelet-client.key"): key})
}

// bridgeIPs is the address of the env's bridge (the first of its subnet),
// or nothing without real nodes.
func (e *Env) bridgeIPs() []net.IP {
	e.mu.Lock()
	rec := e.nodeRec
	e.mu.Unlock()
	if rec == nil {
		return nil
	}
	_, subnet, err := net.ParseCIDR(rec.Subnet)
	if err != nil || subnet.IP.To4() == nil {
		return nil
	}
	ip := append(net.IP(nil), subnet.IP.To4()...)
	ip[3] = 1
	return []net.IP{ip}
}
