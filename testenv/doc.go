// Package testenv runs a real Kubernetes control plane on this machine for
// tests: etcd and kube-apiserver, and optionally kube-controller-manager,
// kube-scheduler, kwok with fake nodes, and real nodes (kubelet and
// containerd) where Pods run.
//
// It is public because Loom's users need the same thing for their own
// operators' tests, as envtest serves controller-runtime users.
//
// # Getting started
//
//	func TestSomething(t *testing.T) {
//		env := testenv.New(t, testenv.Options{CRDs: []string{"../config/crd"}})
//		rc, err := env.REST(rest.Options{}) // or env.Config() for a manager
//		// env.KubeconfigPath, env.URL, env.CAPEM, env.AdminCertPEM ...
//	}
//
// Options.CRDs installs CustomResourceDefinitions from files or folders
// before Start returns, once each is established and discoverable, so the
// test can use its custom resources at once. [Env.Config] and [Env.REST]
// give the admin's configuration and a REST client.
//
// New starts the servers, stops them when the test ends and prints the tail
// of each server's log if the test failed. Start is the same without a
// testing.TB, for programs such as `loom dev`.
//
// # Sharing a control plane
//
// [Shared] starts one control plane for all the tests of a package (call
// its Main from TestMain), and [Env.Namespace] gives each test a
// namespace of its own. With [Shared.AcrossPackages], the packages of one
// `go test ./...` run share one control plane, served by a process of its
// own that stops it when the go command exits.
//
// # Binaries
//
// The binaries are built from Go modules by `loom assets` (which fetches
// the build recipe of its release, the module github.com/loom-k8s/loom/tools,
// through the module proxy; `make assets` in a Loom checkout), into
// ${XDG_CACHE_HOME:-$HOME/.cache}/loom/<versions>/bin.
// LOOM_ASSETS overrides that folder. The versions are pinned in
// versions.env, embedded here, so testenv looks in the folder that the
// matching build wrote.
//
// # Processes
//
// Every server runs in its own process group with a parent-death signal, so
// nothing outlives the test binary even when it panics or is killed (a
// control plane shared across packages outlives each test binary, and
// not the go command that ran them). Each
// child also carries the identity of its parent in its environment; Start
// sweeps children whose parent is gone (left by an earlier run that was
// killed with SIGKILL before the signal could be set up).
//
// # Faults
//
// Env has hooks for chaos tests: RestartAPIServer (kill -9, then start on
// the same port and data), CompactEtcd, StopEtcd and StartEtcd.
//
// # Authentication
//
// The servers share one generated CA. The admin identity is in the group
// system:masters, as a client certificate (AdminCertPEM, used by the written
// kubeconfig) and as a static bearer token (AdminToken). UserCert issues a
// certificate for any other user, with no RBAC granted.
//
// # Aggregated API servers
//
// kube-apiserver runs with the aggregation layer on: a front-proxy CA
// (FrontProxyCAPEM) and proxy client certificate, and the request-header
// flags (X-Remote-User, X-Remote-Group, X-Remote-Extra-*).
// RegisterLocalAPIService points a group version at an HTTPS server on
// 127.0.0.1 (through an ExternalName Service, since endpoints may not be
// loopback addresses), and WaitAPIServiceAvailable waits until
// kube-apiserver has reached it. ServingCert issues the server a
// certificate for LocalAPIServiceHost, the name kube-apiserver checks.
//
// # Real nodes
//
// Options.RealNodes starts real nodes beside the control plane, so that
// Pods really run: each node is a kubelet with a containerd of its own, on
// this machine, with no Docker and nothing downloaded. They need Linux,
// root, and containerd, runc and the CNI plugins (Debian's containerd, runc
// and containernetworking-plugins packages; tools/node-deps.sh in a Loom
// checkout installs them); where something is missing, Start fails with a
// *RealNodesUnavailableError (errors.Is ErrRealNodesUnavailable) that names
// it and the command that installs it. Fake nodes (Options.Nodes) need
// none of it, and both kinds can run in one env.
//
// Nothing is pulled: Env.ImportImage loads an image (a go-containerregistry
// v1.Image, such as the images `loom build image` makes) into
// every node, and Pods use imagePullPolicy Never or IfNotPresent. The pause
// image every Pod sandbox runs is built at Start from a small Go program.
//
// Every node's containerd keeps its data, state and socket in the state
// folder; kubelet runs under a cgroup of the env's own, in a mount
// namespace of its own where the six kernel settings it would otherwise
// rewrite are covered by files, so the machine's values stay. Pods get
// addresses on a bridge named loom<id>, in a /16 of 10/8 that nothing else
// on the machine uses; this machine reaches them at their Pod IPs.
// With real nodes kube-apiserver listens on the bridge's own address (not
// 127.0.0.1), which the machine and the Pods both reach, and kube-proxy
// (nftables mode) routes Services, so an operator in a Pod finds the API
// server with in-cluster config and kube-apiserver calls webhooks through
// their Service. kube-proxy's nftables tables have fixed names, so one
// env at a time on a machine runs it: an env started while another holds
// it logs a warning, and its Services do not route.
//
// Stop stops kubelet, then every Pod sandbox through containerd (so the
// CNI plugin releases its network), then containerd, and removes what was
// left: processes in the env's cgroups, containerd's shims, mounts in the
// state folder, the bridge, the cgroups. What kubelet and containerd write
// outside the state folder whatever their configuration
// (/var/lib/kubelet/device-plugins, /var/log/containers, /var/lib/cni,
// /run/containerd, /run/netns) and net.ipv4.ip_forward are put back as they
// were when the last env with real nodes on the machine stops; a record in
// /run/loom-testenv-nodes.json tracks the running envs, and Start cleans
// up after an env whose process died. docs/dev-cluster.md has the details
// and the costs.
//
// # Tracing
//
// With Options.Tracing, Start runs a TraceCollector in the test process
// and points kube-apiserver's OpenTelemetry exporter at it (OTLP over gRPC,
// without TLS); Env.Traces holds the spans kube-apiserver sends, converted
// to plain Span values, under the service name "apiserver". Its WaitFor
// waits until the spans meet a condition.
//
// kube-apiserver runs with a sampling rate of 0 per million: it records a
// request only when the request carries a W3C traceparent header whose
// sampled flag is set, and then its spans continue that trace, so a test
// sees only the traces it started. kube-apiserver continues an incoming
// trace only for privileged callers, users in the group system:masters
// (such as the admin) or system:monitoring; for anyone else it starts a
// new, unsampled trace and records nothing.
//
// kube-apiserver sends its spans in batches, every 5 seconds: wait for
// them with WaitFor and a generous deadline rather than reading them at
// once.
//
// NewTraceCollector runs a collector on its own, without a control plane,
// for a program's own exporters.
package testenv
