package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestPulumiImageSpec: the user image has the three Pulumi tools and no
// Stackpilot binary, runs as 65532 with HOME=/tmp (also in /etc/passwd), and
// shares the controller image's tool layers.
func TestPulumiImageSpec(t *testing.T) {
	g := NewWithT(t)
	tools := t.TempDir()
	for _, tool := range ControllerImageTools {
		g.Expect(os.WriteFile(filepath.Join(tools, tool), []byte("static "+tool), 0o755)).To(Succeed())
	}
	spec, err := PulumiImageSpec(tools)
	g.Expect(err).NotTo(HaveOccurred())
	var paths []string
	for _, b := range spec.Binaries {
		paths = append(paths, b.Path)
	}
	g.Expect(paths).To(ConsistOf("/usr/local/bin/pulumi", "/usr/local/bin/pulumi-language-yaml", "/usr/local/bin/pulumi-resource-kubernetes"))
	g.Expect(spec.User).To(Equal("65532:65532"))
	g.Expect(spec.Env).To(ContainElements("HOME=/tmp", HavePrefix("PATH=/usr/local/bin:")))
	g.Expect(spec.Base).To(ContainElement(File{Path: "/tmp", Dir: true, Mode: 0o1777}))
	g.Expect(string(spec.Base[0].Data)).To(ContainSubstring("nonroot:x:65532:65532:nonroot:/tmp:"))
	for _, f := range append(spec.Base, spec.Binaries...) {
		g.Expect(strings.Contains(f.Path, "stackpilot")).To(BeFalse(), "%s in the user image", f.Path)
	}

	controller := filepath.Join(tools, "stackpilot-controller")
	g.Expect(os.WriteFile(controller, []byte("controller"), 0o755)).To(Succeed())
	cspec, err := ControllerImageSpec(controller, tools)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(cspec.Base[0].Data)).To(Equal(etcPasswd), "the controller image changed")
	g.Expect(cspec.Binaries[1:]).To(Equal(spec.Binaries))
	g.Expect(cspec.Entrypoint).To(Equal([]string{"/usr/local/bin/stackpilot-controller"}))
}

// TestPruneCache: a layer not kept goes, unless it was used within pruneGrace
// (a concurrent build may be about to push it).
func TestPruneCache(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	old := time.Now().Add(-2 * pruneGrace)
	files := map[string]bool{} // name -> kept after pruning
	for name, f := range map[string]struct {
		keep, recent bool
	}{"kept.tar.gz": {true, false}, "stale.tar.gz": {false, false}, "recent.tar.gz": {false, true}} {
		p := filepath.Join(dir, name)
		g.Expect(os.WriteFile(p, []byte(name), 0o644)).To(Succeed())
		if !f.recent {
			g.Expect(os.Chtimes(p, old, old)).To(Succeed())
		}
		files[name] = f.keep || f.recent
	}
	pruneCache(dir, []string{filepath.Join(dir, "kept.tar.gz")})
	for name, stays := range files {
		if stays {
			g.Expect(filepath.Join(dir, name)).To(BeAnExistingFile())
		} else {
			g.Expect(filepath.Join(dir, name)).NotTo(BeAnExistingFile())
		}
	}
}
