package runner

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// tornStack is a file:// backend holding stack dev of project web with a
// checkpoint, its sidecar and its tags.
func tornStack(t *testing.T) (dir string, fs fileStack) {
	t.Helper()
	dir = t.TempDir()
	stacks := filepath.Join(dir, ".pulumi", "stacks", "web")
	if err := os.MkdirAll(stacks, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".pulumi", "meta.yaml"), []byte("version: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"dev.json":                `{"version":3,"checkpoint":{}}`,
		"dev.json.attrs":          `{"user.content_type":"application/octet-stream"}` + "\n",
		"dev.pulumi-tags":         `{"version":1,"tags":{}}`,
		"dev.prod.json":           `{"version":3,"checkpoint":{}}`, // another stack, a prefix alike
		"dev.prod.json.attrs":     "",
		"dev.prod.json.1234.tmp":  "x",
		"dev.json.backup-not-tmp": "kept",
	} {
		if err := os.WriteFile(filepath.Join(stacks, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, openFileStack(dir, "web", "dev")
}

func TestTornStateRepairsWhatIsProvablySafe(t *testing.T) {
	g := NewWithT(t)
	dir, fs := tornStack(t)
	stacks := filepath.Join(dir, ".pulumi", "stacks", "web")

	// Nothing torn: nothing done.
	repairs, err := fs.repairSidecars()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(repairs).To(BeEmpty())

	// A write cut short: the sidecar empty, the temporary file beside it.
	g.Expect(os.WriteFile(filepath.Join(stacks, "dev.json.attrs"), nil, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(stacks, "dev.pulumi-tags.attrs"), nil, 0o600)).To(Succeed())
	tmp := filepath.Join(stacks, "dev.json.187d2c4f0a9b3e21.tmp")
	g.Expect(os.WriteFile(tmp, []byte(`{"version":3,"checkp`), 0o600)).To(Succeed())
	old := time.Now().Add(-time.Hour)
	g.Expect(os.Chtimes(tmp, old, old)).To(Succeed())
	fresh := filepath.Join(stacks, "dev.json.77.tmp") // a writer's, maybe still writing
	g.Expect(os.WriteFile(fresh, []byte("{"), 0o600)).To(Succeed())

	repairs, err = fs.repairSidecars()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(repairs).To(ConsistOf(
		ContainSubstring("removed the empty sidecar "+filepath.Join(stacks, "dev.json.attrs")),
		ContainSubstring("removed the empty sidecar "+filepath.Join(stacks, "dev.pulumi-tags.attrs")),
	))
	g.Expect(filepath.Join(stacks, "dev.json.attrs")).NotTo(BeAnExistingFile())

	// Temporary files go only when no lock is held, and only old ones.
	repairs = fs.removeStaleTemps([]string{"a lock"}, time.Now())
	g.Expect(repairs).To(BeEmpty())
	g.Expect(tmp).To(BeAnExistingFile())
	repairs = fs.removeStaleTemps(nil, time.Now())
	g.Expect(repairs).To(ConsistOf(ContainSubstring("removed the stale temporary file " + tmp)))
	g.Expect(tmp).NotTo(BeAnExistingFile())
	g.Expect(fresh).To(BeAnExistingFile())

	// The checkpoint itself and the other stack's files are never touched.
	for _, kept := range []string{"dev.json", "dev.pulumi-tags", "dev.prod.json", "dev.prod.json.attrs", "dev.prod.json.1234.tmp", "dev.json.backup-not-tmp"} {
		g.Expect(filepath.Join(stacks, kept)).To(BeAnExistingFile())
	}
}

func TestTornStateRefusesWhatItCannotProve(t *testing.T) {
	g := NewWithT(t)
	dir, fs := tornStack(t)
	stacks := filepath.Join(dir, ".pulumi", "stacks", "web")

	// Half a sidecar: not provably only metadata to drop; say what to do.
	g.Expect(os.WriteFile(filepath.Join(stacks, "dev.json.attrs"), []byte(`{"user.content_ty`), 0o600)).To(Succeed())
	_, err := fs.repairSidecars()
	var torn *TornStateError
	g.Expect(errors.As(err, &torn)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(filepath.Join(stacks, "dev.json.attrs")))
	g.Expect(err.Error()).To(ContainSubstring("remove it"))
	g.Expect(filepath.Join(stacks, "dev.json.attrs")).To(BeAnExistingFile())

	// An empty checkpoint is never repaired: it names the backup to restore.
	g.Expect(os.WriteFile(filepath.Join(stacks, "dev.json.attrs"), nil, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(stacks, "dev.json"), nil, 0o600)).To(Succeed())
	_, err = fs.repairSidecars()
	g.Expect(errors.As(err, &torn)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(filepath.Join(stacks, "dev.json") + " is empty"))
	g.Expect(err.Error()).To(ContainSubstring("dev.json.bak"))
	g.Expect(filepath.Join(stacks, "dev.json")).To(BeAnExistingFile())
}
