package cluster

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// serviceCIDR is the (unused) service range; the API server insists on one. With
// no kube-proxy, Pods reach the API server through KUBERNETES_SERVICE_HOST/PORT
// in their env instead of the service IP: at 127.0.0.1 with host networking
// (HostNetworkEnv), at the Pod network's gateway otherwise (PodNetworkEnv).
const (
	serviceCIDR = "10.96.0.0/24"
	serviceIP   = "10.96.0.1"
)

// identity is one user of the static token file.
type identity struct{ token, user, groups string }

func (c *Cluster) identities(p *certs) map[string]identity {
	return map[string]identity{
		"admin":              {p.Tokens["admin"], "stackpilot-admin", "system:masters"},
		"controller-manager": {p.Tokens["controller-manager"], "system:kube-controller-manager", ""},
		"scheduler":          {p.Tokens["scheduler"], "system:kube-scheduler", ""},
		"kubelet":            {p.Tokens["kubelet"], "system:node:" + c.NodeName, "system:nodes"},
	}
}

// writeAuth writes the API server's token file and one kubeconfig per identity.
func (c *Cluster) writeAuth(p *certs) error {
	var lines []string
	for name, id := range c.identities(p) {
		line := fmt.Sprintf("%s,%s,%s", id.token, id.user, name)
		if id.groups != "" {
			line += fmt.Sprintf(",%q", id.groups)
		}
		lines = append(lines, line)
		path := filepath.Join(c.Dir, "kubeconfig-"+name)
		if name == "admin" {
			path = c.Kubeconfig
		}
		if err := writeKubeconfig(path, c.APIServer, p.CA, id.token); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(c.Dir, "pki", "tokens.csv"), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

func writeKubeconfig(path, server, caFile, token string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: stackpilot
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: stackpilot
  user:
    token: %s
contexts:
- name: stackpilot
  context: {cluster: stackpilot, user: stackpilot}
current-context: stackpilot
`, server, base64.StdEncoding.EncodeToString(ca), token)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// containerdConfig keeps every containerd path under the cluster's directory, so
// one cluster never touches another's (or the machine's) containerd, and Down
// finds everything it must unmount and remove.
func (c *Cluster) containerdConfig() string {
	d := filepath.Join(c.Dir, "containerd")
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # This machine does not grant CAP_SYS_RESOURCE: without this, runc cannot
  # write a negative oom_score_adj and every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's state lives with the cluster, so Down (and the next Up, after a
        # crash) can find and delete every container it left.
        Root = %[6]q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q

  [plugins."io.containerd.grpc.v1.cri".registry]
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors]
      [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%[8]q]
        endpoint = [%[9]q]
`, filepath.Join(d, "root"), filepath.Join(d, "state"), c.containerdSocket(),
		filepath.Join(d, "opt"), c.Registry+"/"+PauseRepository+":"+PauseTag,
		c.runcRoot(), filepath.Join(c.Dir, "cni"), c.Registry, "http://"+c.Registry)
}

func (c *Cluster) containerdSocket() string { return filepath.Join(c.Dir, "containerd.sock") }
func (c *Cluster) runcRoot() string         { return filepath.Join(c.Dir, "runc") }

// kubeletConfig is the KubeletConfiguration for this machine: cgroup v1 with the
// cgroupfs driver, no per-QoS cgroups and no node-allocatable enforcement (the
// machine grants neither), swap tolerated, everything on 127.0.0.1.
func (c *Cluster) kubeletConfig(p *certs) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
podLogsDir: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
serializeImagePulls: false
# This disk is shared with other work: never evict for disk or memory pressure,
# never garbage-collect images because of someone else's files.
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 10s
resolvConf: /etc/resolv.conf
rotateCertificates: false
serverTLSBootstrap: false
protectKernelDefaults: false
localStorageCapacityIsolation: false
shutdownGracePeriod: 0s
`, c.KubeletPort, c.KubeletHealthzPort, c.containerdSocket(), filepath.Join(c.Dir, "pod-logs"), p.CA)
}
