package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// TestUpSmokeDown starts a real cluster, runs a host-network Pod from the
// loopback registry to completion, and checks that Down leaves no process, no
// mount and no directory behind. It needs root, containerd and runc (skipped
// otherwise, unless STACKPILOT_REQUIRE_CLUSTER=1).
func TestUpSmokeDown(t *testing.T) {
	c := testenv.StartCluster(t, nil)
	g := NewWithT(t)
	took, err := c.Smoke(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("up in %.1fs; smoke Pod Completed in %s", c.UpSeconds, took)

	// Down is idempotent: the cleanup StartCluster registered runs it again.
	g.Expect(c.Down()).To(Succeed())
	g.Expect(c.Dir).NotTo(BeADirectory())
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Contains(string(mounts), c.Dir)).To(BeFalse(), "mounts left under %s", c.Dir)
	g.Expect(cluster.ProcessesMentioning(c.Dir)).To(BeEmpty())
	g.Expect(c.PodBridge).To(Equal(cluster.BridgeName(c.Dir)))
	g.Expect(filepath.Join("/sys/class/net", c.PodBridge)).NotTo(BeAnExistingFile(), "bridge left")
}
