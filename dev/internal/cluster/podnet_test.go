package cluster

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestBridgeName(t *testing.T) {
	g := NewWithT(t)
	a, b := bridgeName("/var/tmp/spc-1"), bridgeName("/var/tmp/spc-2")
	g.Expect(a).To(HavePrefix(bridgePrefix))
	g.Expect(len(a)).To(BeNumerically("<=", 15), "Linux interface names are at most 15 bytes")
	g.Expect(a).NotTo(Equal(b))
	g.Expect(bridgeName("/var/tmp/spc-1")).To(Equal(a))
}

func TestFreeSubnet(t *testing.T) {
	g := NewWithT(t)
	_, rng, _ := net.ParseCIDR(podNetRange)
	first, gw, err := freeSubnet("/var/tmp/spc-test", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rng.Contains(first.IP)).To(BeTrue())
	g.Expect(first.Contains(gw)).To(BeTrue())
	g.Expect(gw.To4()[3]).To(BeEquivalentTo(1))
	ones, _ := first.Mask.Size()
	g.Expect(ones).To(Equal(24))

	// Another cluster's gateway in the first choice, an address of the
	// machine in the next: the third /24 it is.
	next := func(n *net.IPNet) *net.IPNet {
		ip := append(net.IP{}, n.IP.To4()...)
		ip[2]++
		return &net.IPNet{IP: ip, Mask: n.Mask}
	}
	second := next(first)
	used := []net.Addr{
		&net.IPNet{IP: gw, Mask: first.Mask},
		&net.IPNet{IP: append(append(net.IP{}, second.IP.To4()[:3]...), 200), Mask: second.Mask},
	}
	got, _, err := freeSubnet("/var/tmp/spc-test", used)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.String()).To(Equal(next(second).String()))

	// A network of the machine over the whole range leaves nothing.
	_, _, err = freeSubnet("/var/tmp/spc-test", []net.Addr{&net.IPNet{IP: net.IPv4(10, 213, 0, 5), Mask: net.CIDRMask(16, 32)}})
	g.Expect(err).To(MatchError(ContainSubstring("in use")))

	// This machine's own addresses are never chosen.
	addrs, err := net.InterfaceAddrs()
	g.Expect(err).NotTo(HaveOccurred())
	mine, _, err := freeSubnet("/var/tmp/spc-test", addrs)
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			g.Expect(mine.Contains(n.IP)).To(BeFalse(), "%s is in use here (%s)", mine, n)
		}
	}
}

// TestCNIConfig pins what keeps Pod traffic on the bridge: the plugin is not
// the gateway (it would turn on ip_forward), no masquerading, no routes, and
// IPAM state under the cluster's directory.
func TestCNIConfig(t *testing.T) {
	g := NewWithT(t)
	_, subnet, _ := net.ParseCIDR("10.213.7.0/24")
	n := &podNet{Bridge: "spc-0123456789", Subnet: subnet, Gateway: net.ParseIP("10.213.7.1")}
	var cfg struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type             string `json:"type"`
			Bridge           string `json:"bridge"`
			IsGateway        bool   `json:"isGateway"`
			IsDefaultGateway bool   `json:"isDefaultGateway"`
			IPMasq           bool   `json:"ipMasq"`
			IPAM             struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
				Ranges  [][]struct {
					Subnet, Gateway string
				} `json:"ranges"`
				Routes []any `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	g.Expect(json.Unmarshal([]byte(n.cniConfig("/var/tmp/spc-x")), &cfg)).To(Succeed())
	g.Expect(cfg.Plugins).To(HaveLen(1))
	p := cfg.Plugins[0]
	g.Expect(p.Type).To(Equal("bridge"))
	g.Expect(p.Bridge).To(Equal(n.Bridge))
	g.Expect(p.IsGateway).To(BeFalse())
	g.Expect(p.IsDefaultGateway).To(BeFalse())
	g.Expect(p.IPMasq).To(BeFalse())
	g.Expect(p.IPAM.Type).To(Equal("host-local"))
	g.Expect(p.IPAM.DataDir).To(HavePrefix("/var/tmp/spc-x/"))
	g.Expect(p.IPAM.Routes).To(BeEmpty())
	g.Expect(p.IPAM.Ranges).To(HaveLen(1))
	g.Expect(p.IPAM.Ranges[0][0].Subnet).To(Equal("10.213.7.0/24"))
	g.Expect(p.IPAM.Ranges[0][0].Gateway).To(Equal("10.213.7.1"))
}

// TestRemoveOrphanBridges: a bridge whose cluster directory is gone is
// removed; one whose directory exists is not.
func TestRemoveOrphanBridges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (creates bridges)")
	}
	g := NewWithT(t)
	live := t.TempDir()
	gone := filepath.Join(t.TempDir(), "gone")
	for _, dir := range []string{live, gone} {
		name := bridgeName(dir)
		g.Expect(ipCmd("link", "add", name, "type", "bridge")).To(Succeed())
		t.Cleanup(func() { _ = ipCmd("link", "del", name) })
		g.Expect(ipCmd("link", "set", name, "alias", dir)).To(Succeed())
	}
	removeOrphanBridges(os.Stderr)
	g.Expect(filepath.Join("/sys/class/net", bridgeName(gone))).NotTo(BeAnExistingFile())
	g.Expect(filepath.Join("/sys/class/net", bridgeName(live))).To(BeAnExistingFile())
}
