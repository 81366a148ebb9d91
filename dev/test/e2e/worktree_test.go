package e2e

import (
	"time"

	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// readFileProgram reads a file from outside its own folder (fn::readFile is
// relative to the project directory), and a value from its committed stack
// settings file.
const readFileProgram = `name: web
runtime: yaml
config:
  namespace:
    type: string
  greeting:
    type: string
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: web-settings
        namespace: ${namespace}
      data:
        policy:
          fn::readFile: ../../shared/policy.txt
        greeting: ${greeting}
`

// TestWorkTreeIsTheWholeRepository: the work directory holds the whole
// repository, hard-linked from the artifact cache, so a program reads files
// beside its folder; Pulumi and the runner write the stack settings file (a
// committed one) during the up, and the cached copy is unchanged.
func TestWorkTreeIsTheWholeRepository(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	const committedStackFile = "config:\n  web:greeting: hello\n"
	commit := f.git.Commit(t, "infra", "main", map[string]string{
		"apps/web/Pulumi.yaml":        readFileProgram,
		"apps/web/Pulumi.shared.yaml": committedStackFile,
		"shared/policy.txt":           "allow-all",
	}, "program beside a shared file")
	f.start(t)

	stack := f.stack("shared", func(s *v1alpha1.Stack) { s.Spec.Source.Dir = "apps/web" })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	s := waitApplied(t, client.ObjectKeyFromObject(stack), commit)
	g.Eventually(func(g Gomega) {
		data := configMapData(g, f.ns, "web-settings")
		g.Expect(data).To(HaveKeyWithValue("policy", "allow-all"))
		g.Expect(data).To(HaveKeyWithValue("greeting", "hello"))
	}, time.Minute, 50*time.Millisecond).Should(Succeed())

	// The cached program is as committed: the stack file the up rewrote
	// (config from the spec, the passphrase's encryptionsalt) was a copy.
	art := s.Status.LastAppliedArtifact
	g.Expect(art).NotTo(BeNil())
	cached := filepath.Join(f.dataDir, "artifacts", "sha256", art.Digest[len("sha256:"):])
	b, err := os.ReadFile(filepath.Join(cached, "apps/web/Pulumi.shared.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(committedStackFile))
	b, err = os.ReadFile(filepath.Join(cached, "apps/web/Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(readFileProgram))
	g.Expect(f.ctrl.Logs(t)).NotTo(ContainSubstring("wrote into the cached program"))
}
