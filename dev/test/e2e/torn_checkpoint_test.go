package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestTornCheckpointSidecarRepaired: a controller killed while Pulumi writes
// its checkpoint to a file:// backend can leave the checkpoint's ".attrs"
// sidecar empty and a temporary file beside it; every later load then
// fails ("failed to load checkpoint: EOF"). Made here by hand: the next
// operation repairs both (never the checkpoint), applies, and says so in
// its history entry and an event.
func TestTornCheckpointSidecarRepaired(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("torn")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	// The default backend: <data dir>/state/<namespace>, project "bridge".
	stacks := filepath.Join(f.dataDir, "state", f.ns, ".pulumi", "stacks", "bridge")
	checkpoint := filepath.Join(stacks, "torn.json")
	before, err := os.ReadFile(checkpoint)
	g.Expect(err).NotTo(HaveOccurred())
	sidecar := checkpoint + ".attrs"
	g.Expect(sidecar).To(BeAnExistingFile(), "the file backend writes a sidecar")
	g.Expect(os.Truncate(sidecar, 0)).To(Succeed())
	tmp := filepath.Join(stacks, "torn.json.187d2c4f0a9b3e21.tmp")
	g.Expect(os.WriteFile(tmp, before[:len(before)/2], 0o600)).To(Succeed())
	old := time.Now().Add(-time.Hour)
	g.Expect(os.Chtimes(tmp, old, old)).To(Succeed())

	// A change, so that an up runs.
	s := getStack(g, key)
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Config["color"] = apiextensionsv1.JSON{Raw: []byte(`"green"`)}
	g.Expect(env.Client.Patch(ctx, s, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "green"))
	}, 4*time.Minute, time.Second).Should(Succeed(), "Ready: %s", func() string { return readyMessage(getStack(g, key)) })
	s = waitApplied(t, key, f.commit)

	up := s.Status.History[0]
	g.Expect(up.Type).To(Equal(v1alpha1.OperationType("up")))
	g.Expect(string(up.Outcome)).To(Equal("succeeded"))
	g.Expect(up.Message).To(ContainSubstring("removed the empty sidecar " + sidecar))
	g.Expect(up.Message).To(ContainSubstring("removed the stale temporary file " + tmp))
	g.Expect(tmp).NotTo(BeAnExistingFile())
	g.Eventually(func() []string { return stackEvents(t, f.ns, stack.Name) }, time.Minute, time.Second).Should(
		ContainElement(And(HavePrefix("StateRepaired: "), ContainSubstring(sidecar))))
	after, err := os.ReadFile(checkpoint)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Contains(string(after), "green")).To(BeTrue(), "the up wrote its checkpoint")
}
