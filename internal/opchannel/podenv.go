package opchannel

import (
	"os"
	"path/filepath"
)

// podEnv moves HOME and TMPDIR under the work root when the image's are not
// writable: the Pod runs with a read-only root file system, and the runner
// (its event log), Pulumi and the language hosts (npm, pip, go caches) write
// there. Everything else of the Pod's environment reaches Pulumi as it is
// (see doc.go).
func podEnv(workRoot string) error {
	for _, v := range []struct{ name, fallback, dir string }{
		{"HOME", "", "home"},
		{"TMPDIR", os.TempDir(), "tmp"},
	} {
		cur := os.Getenv(v.name)
		if cur == "" {
			cur = v.fallback
		}
		if cur != "" && writable(cur) {
			continue
		}
		dir := filepath.Join(workRoot, v.dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Setenv(v.name, dir); err != nil {
			return err
		}
	}
	return nil
}

// writable says a file can be created in dir.
func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".stackpilot-write-check-*")
	if err != nil {
		return false
	}
	name := f.Name()
	f.Close()
	_ = os.Remove(name)
	return true
}
