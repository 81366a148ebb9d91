package cluster

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The Pod network is one Linux bridge per cluster with a /24 of podNetRange.
// The host holds the first address (the gateway) on the bridge; each Pod that
// is not hostNetwork gets a veth on the bridge and an address from host-local
// IPAM, and no route but the subnet's own. Nothing is routed beyond the
// bridge: the CNI plugin never becomes the gateway (the bridge plugin would
// turn on the machine's ip_forward), there is no masquerading and no default
// route in the Pod, and forwarding is off for packets that come in on the
// bridge. So a Pod reaches other Pods and whatever the host serves on the
// gateway address (or on 0.0.0.0, as the API server does), and nothing else.
const (
	// podNetRange holds every cluster's /24; the third octet tells clusters apart.
	podNetRange = "10.213.0.0/16"
	// bridgePrefix starts every cluster's bridge name; the rest is a hash of
	// the cluster's directory (interface names are limited to 15 bytes).
	bridgePrefix = "spc-"
	// PodNetLockPath serialises the choice of a subnet and the creation of
	// its bridge between clusters that start at the same time (detached ones
	// do not take MachineLockPath).
	PodNetLockPath = "/var/tmp/stackpilot-podnet.lock"
)

// podNet is the Pod network of one cluster.
type podNet struct {
	Bridge  string
	Subnet  *net.IPNet
	Gateway net.IP
}

// bridgeName is the bridge of the cluster in dir: a function of dir alone, so
// that Down finds it with nothing but the directory.
func bridgeName(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return bridgePrefix + hex.EncodeToString(sum[:])[:10]
}

// setUpPodNet picks a /24 that no interface of this machine uses, creates the
// cluster's bridge with the gateway address on it and turns off what would
// route Pod traffic elsewhere. The bridge's alias is the cluster's directory,
// which lets a later Up remove a bridge whose directory is gone.
func setUpPodNet(dir string) (*podNet, error) {
	unlock, err := lockFile(PodNetLockPath)
	if err != nil {
		return nil, err
	}
	defer unlock()
	n := &podNet{Bridge: bridgeName(dir)}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	if n.Subnet, n.Gateway, err = freeSubnet(dir, addrs); err != nil {
		return nil, err
	}
	gw := &net.IPNet{IP: n.Gateway, Mask: n.Subnet.Mask}
	steps := [][]string{
		{"link", "add", n.Bridge, "type", "bridge"},
		{"link", "set", n.Bridge, "alias", dir},
		{"addr", "add", gw.String(), "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			_ = ipCmd("link", "del", n.Bridge)
			return nil, err
		}
	}
	// Packets that arrive on the bridge are never forwarded to another
	// interface, whatever the machine's ip_forward says; no IPv6 on it.
	for path, v := range map[string]string{
		"/proc/sys/net/ipv4/conf/" + n.Bridge + "/forwarding":   "0",
		"/proc/sys/net/ipv6/conf/" + n.Bridge + "/disable_ipv6": "1",
	} {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			_ = ipCmd("link", "del", n.Bridge)
			return nil, fmt.Errorf("cluster: pod network: %w", err)
		}
	}
	return n, nil
}

// freeSubnet is the first /24 of podNetRange, starting at one picked by dir,
// that overlaps none of addrs (this machine's).
func freeSubnet(dir string, addrs []net.Addr) (*net.IPNet, net.IP, error) {
	_, rng, _ := net.ParseCIDR(podNetRange)
	sum := sha256.Sum256([]byte(dir))
	first := int(binary.BigEndian.Uint16(sum[:2]) % 256)
	for i := range 256 {
		third := byte((first + i) % 256)
		subnet := &net.IPNet{IP: net.IPv4(rng.IP[0], rng.IP[1], third, 0).To4(), Mask: net.CIDRMask(24, 32)}
		used := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(subnet.IP)) {
				used = true
				break
			}
		}
		if !used {
			return subnet, net.IPv4(rng.IP[0], rng.IP[1], third, 1).To4(), nil
		}
	}
	return nil, nil, fmt.Errorf("cluster: pod network: every /24 of %s is in use on this machine", podNetRange)
}

// cniConfig is the bridge network of the cluster: containerd loads it (and the
// loopback plugin) for every Pod that is not hostNetwork. IPAM state lives
// under the cluster's directory, not /var/lib/cni.
func (n *podNet) cniConfig(dir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %[1]q,
  "plugins": [{
    "type": "bridge",
    "bridge": %[1]q,
    "isGateway": false,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": false,
    "ipam": {
      "type": "host-local",
      "dataDir": %[2]q,
      "ranges": [[{"subnet": %[3]q, "gateway": %[4]q}]],
      "routes": []
    }
  }]
}
`, n.Bridge, filepath.Join(dir, "cni", "ipam"), n.Subnet.String(), n.Gateway.String())
}

// removeBridge deletes the bridge of the cluster in dir, if there is one. The
// Pods' veths go with their network namespaces (which unmountUnder releases);
// one still attached goes with the bridge.
func removeBridge(dir string, log io.Writer) error {
	name := bridgeName(dir)
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	if err := ipCmd("link", "del", name); err != nil {
		return err
	}
	fmt.Fprintf(log, "cluster: removed bridge %s\n", name)
	return nil
}

// removeOrphanBridges deletes the bridges of clusters whose directory is gone
// (removed by hand after a crash, so Down never ran for it): their alias is
// the directory.
func removeOrphanBridges(log io.Writer) {
	ifs, err := net.Interfaces()
	if err != nil {
		return
	}
	for _, i := range ifs {
		if !strings.HasPrefix(i.Name, bridgePrefix) {
			continue
		}
		alias, err := os.ReadFile("/sys/class/net/" + i.Name + "/ifalias")
		dir := strings.TrimSpace(string(alias))
		if err != nil || !filepath.IsAbs(dir) || bridgeName(dir) != i.Name {
			continue // not one of ours
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			if err := removeBridge(dir, log); err != nil {
				fmt.Fprintf(log, "cluster: %v\n", err)
			}
		}
	}
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster: pod network: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lockFile holds an exclusive flock on path until unlock (or this process's end).
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
