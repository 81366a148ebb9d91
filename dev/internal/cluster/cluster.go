// Package cluster runs a real one-node Kubernetes cluster on this machine:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the kubelet
// from the pinned binaries in bin/, containerd and runc from the machine
// (Debian packages), and an OCI registry on loopback that images are pushed to
// without Docker.
//
// Pods either use host networking or the cluster's Pod network: a bridge of
// its own (named after the cluster's directory) with a private /24, whose
// first address, PodGateway, is the host's. Such a Pod reaches other Pods and
// whatever the host serves on PodGateway (the API server, and test servers
// bound to it), and nothing beyond the bridge: no default route, no
// masquerading, no forwarding. There is no kube-proxy and no cluster DNS, so
// the `kubernetes` Service's ClusterIP leads nowhere: a Pod finds the API
// server through KUBERNETES_SERVICE_HOST/PORT in its env, which
// PodNetworkEnv (PodGateway and the API server's port) or, for host
// networking, HostNetworkEnv (127.0.0.1) give. The API server listens on
// 0.0.0.0 for that, and its certificate names PodGateway.
//
// Everything a cluster writes lives under its directory: containerd's root and
// state, runc's state, the kubelet's root, Pods' network namespaces and IPAM
// state, logs, pid files and keys. Down stops every process, deletes every
// container, unmounts everything under that directory and deletes the bridge,
// also when the process that started the cluster died without cleaning up; Up
// does the same first.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackpilot/stackpilot/internal/daemon"
)

// Options configure Up.
type Options struct {
	// Dir holds everything of the cluster. It should be short: containerd's
	// socket lives in it and socket paths are limited to 107 bytes.
	Dir string
	// Root is the repository root (for building the pause image); BinDir the
	// pinned tools (etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet).
	Root, BinDir string
	// NodeName is the node's name and its hostname address; it must resolve to
	// 127.0.0.1, so that the API server reaches the kubelet (logs, exec) on
	// loopback. Default "localhost".
	NodeName string
	// Ports; 0 picks a free one.
	APIServerPort, RegistryPort, EtcdPort, KubeletPort int
	// Detach lets the processes outlive the caller (`make cluster-up`); they
	// are stopped by Down. Otherwise they are killed when the caller dies.
	Detach bool
	// RegistryCommand serves the registry when detached; it gets --addr and
	// --dir appended (see ServeRegistry).
	RegistryCommand []string
	// Log receives one line per step; nil discards.
	Log io.Writer
}

// Cluster is a running cluster. Its exported fields are also written to
// <Dir>/cluster.json, which Load reads.
type Cluster struct {
	Dir                string
	NodeName           string
	Kubeconfig         string // admin (system:masters)
	APIServer          string // https://127.0.0.1:<port>
	APIServerPort      int
	Registry           string // 127.0.0.1:<port>
	EtcdPort           int
	KubeletPort        int
	KubeletHealthzPort int
	// PodGateway is the host's address on the Pod network's bridge, PodSubnet
	// that network (CIDR) and PodBridge the bridge's name.
	PodGateway string
	PodSubnet  string
	PodBridge  string
	// UpSeconds is how long Up took.
	UpSeconds float64

	detach       bool
	log          io.Writer
	procs        []*daemon.Process
	stopRegistry func()
	podNet       *podNet
}

// Requirements reports what this machine lacks to run a cluster: root, the
// containerd and runc binaries, the CNI loopback, bridge and host-local
// plugins, ip (iproute2), cgroups. nil means it can; the error says what to
// install.
func Requirements() error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	var missing []string
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{"loopback", "bridge", "host-local"} {
		if _, err := os.Stat("/usr/lib/cni/" + p); err != nil {
			missing = append(missing, "/usr/lib/cni/"+p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cluster: %s not found: apt-get install -y containerd runc containernetworking-plugins iproute2", strings.Join(missing, ", "))
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		return errors.New("cluster: /sys/fs/cgroup is missing")
	}
	return nil
}

// Up starts a cluster in opts.Dir, first cleaning whatever a previous cluster
// there left behind, and returns once the node is Ready and Pods can run.
func Up(ctx context.Context, opts Options) (_ *Cluster, err error) {
	start := time.Now()
	if err := Requirements(); err != nil {
		return nil, err
	}
	if opts.Dir == "" || opts.BinDir == "" || opts.Root == "" {
		return nil, errors.New("cluster: Options.Dir, Root and BinDir are required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("cluster: %s missing from %s: run `make tools`", b, opts.BinDir)
		}
	}
	c := &Cluster{Dir: dir, NodeName: opts.NodeName, detach: opts.Detach, log: opts.Log}
	if c.log == nil {
		c.log = io.Discard
	}
	if c.NodeName == "" {
		c.NodeName = "localhost"
	}
	if err := Down(dir, c.log); err != nil {
		return nil, fmt.Errorf("cluster: clean up what the last cluster in %s left: %w", dir, err)
	}
	removeOrphanBridges(c.log)
	for _, d := range []string{"logs", "pki", "cni", "kubelet", "pod-logs", "etcd", "images"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			c.logf("up failed; logs are in %s", filepath.Join(dir, "logs"))
			_ = Stop(dir, c.log)
			c.stopInProcess()
		}
	}()
	if !c.detach {
		// The processes die with this one; CleanStale recognises a directory
		// whose owner is gone.
		if err := writePidFile(dir, ownerPidName, os.Getpid()); err != nil {
			return nil, err
		}
	}
	if err := c.ports(opts); err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	c.APIServer = fmt.Sprintf("https://127.0.0.1:%d", c.APIServerPort)

	// The Pod network first: the API server's certificate names its gateway.
	if c.podNet, err = setUpPodNet(dir); err != nil {
		return nil, err
	}
	c.PodGateway, c.PodSubnet, c.PodBridge = c.podNet.Gateway.String(), c.podNet.Subnet.String(), c.podNet.Bridge
	c.logf("pod network %s on bridge %s, gateway %s (%s)", c.PodSubnet, c.PodBridge, c.PodGateway, since(start))

	p, err := newCerts(filepath.Join(dir, "pki"), c.podNet.Gateway)
	if err != nil {
		return nil, err
	}
	if err := c.writeAuth(p); err != nil {
		return nil, err
	}

	// The registry and the pause image come first: containerd needs the
	// sandbox image as soon as the first Pod lands.
	if err := c.startRegistry(opts); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+c.Registry+"/v2/", 30*time.Second, nil); err != nil {
		return nil, fmt.Errorf("cluster: registry: %w", err)
	}
	pause, err := PauseImage(ctx, opts.Root, filepath.Join(dir, "images"))
	if err != nil {
		return nil, err
	}
	if _, err := Push(ctx, pause, c.Registry, PauseRepository, PauseTag); err != nil {
		return nil, err
	}
	c.logf("registry on %s, pause image pushed (%s)", c.Registry, since(start))

	if err := c.startControlPlane(ctx, opts, p); err != nil {
		return nil, err
	}
	c.logf("control plane on %s (%s)", c.APIServer, since(start))
	if err := c.startNode(ctx, opts, p); err != nil {
		return nil, err
	}
	c.logf("node %s Ready (%s)", c.NodeName, since(start))
	c.UpSeconds = time.Since(start).Seconds()
	return c, c.save()
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "cluster: "+format+"\n", args...)
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func (c *Cluster) ports(opts Options) error {
	var err error
	pick := func(p int) int {
		if p != 0 || err != nil {
			return p
		}
		var free int
		free, err = daemon.FreePort()
		return free
	}
	c.APIServerPort = pick(opts.APIServerPort)
	c.Registry = "127.0.0.1:" + strconv.Itoa(pick(opts.RegistryPort))
	c.EtcdPort = pick(opts.EtcdPort)
	c.KubeletPort = pick(opts.KubeletPort)
	c.KubeletHealthzPort = pick(0)
	return err
}

// RESTConfig is the admin connection.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
}

// Clientset is an admin clientset.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (c *Cluster) save() error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, "cluster.json"), append(data, '\n'), 0o644)
}

// Load reads the cluster that Up started in dir (for another process, such as
// `make images`).
func Load(dir string) (*Cluster, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return nil, fmt.Errorf("cluster: no cluster in %s (run `make cluster-up`): %w", dir, err)
	}
	c := &Cluster{log: io.Discard}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Down stops this cluster and removes its directory.
func (c *Cluster) Down() error {
	err := Down(c.Dir, c.log)
	c.stopInProcess()
	return err
}

// Stop stops this cluster but keeps its directory (logs) until the next Up or Down.
func (c *Cluster) Stop() error {
	err := Stop(c.Dir, c.log)
	c.stopInProcess()
	return err
}

// stopInProcess ends what runs inside this process: the registry, unless detached.
func (c *Cluster) stopInProcess() {
	if c.stopRegistry != nil {
		c.stopRegistry()
		c.stopRegistry = nil
	}
}

// ownerPidName is the pid file of the process that ran Up without Detach.
const ownerPidName = "owner"

// CleanStale runs Down on every directory matching pattern (a filepath.Glob)
// that holds a cluster whose owner process is gone: what a test killed before
// its cleanup left behind (running containers, mounts). Clusters in use, and
// detached ones, are left alone.
func CleanStale(pattern string, log io.Writer) error {
	dirs, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		for _, f := range readPidFiles(dir) {
			if f.name == ownerPidName && !alive(f.pid, f.start) {
				errs = append(errs, Down(dir, log))
			}
		}
	}
	return errors.Join(errs...)
}
