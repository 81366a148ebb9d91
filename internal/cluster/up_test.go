package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestUpSmokeDown starts a real cluster, runs a host-network Pod from the
// loopback registry to completion, and checks that Down leaves no process and
// no mount behind. It needs root, containerd and runc (skipped otherwise).
func TestUpSmokeDown(t *testing.T) {
	if err := Requirements(); err != nil {
		t.Skipf("no one-node cluster on this machine: %v", err)
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"kubelet", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Skipf("%s missing from %s: run `make cluster-tools` first", b, bin)
		}
	}
	g := NewWithT(t)
	g.Expect(CleanStale("/var/tmp/spc-*", nil)).To(Succeed())
	dir, err := os.MkdirTemp("/var/tmp", "spc-")
	g.Expect(err).NotTo(HaveOccurred())
	c, err := Up(context.Background(), Options{Dir: dir, Root: root, BinDir: bin})
	if err != nil {
		_ = Down(dir, nil)
		t.Fatal(err)
	}
	took, err := c.Smoke(context.Background())
	if err != nil {
		_ = c.Stop()
		for _, f := range []string{"kubelet", "containerd"} {
			data, _ := os.ReadFile(filepath.Join(dir, "logs", f+".log"))
			t.Logf("%s.log:\n%s", f, data)
		}
		_ = Down(dir, nil)
		t.Fatal(err)
	}
	t.Logf("up in %.1fs; smoke Pod Completed in %s", c.UpSeconds, took)
	g.Expect(c.Down()).To(Succeed())
	g.Expect(dir).NotTo(BeADirectory())
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Contains(string(mounts), dir)).To(BeFalse(), "mounts left under %s", dir)
	g.Expect(processesMentioning(dir)).To(BeEmpty())
}
