package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// install-runner copies the running binary, whole and read-only executable,
// where the init container's emptyDir is.
func TestInstallRunnerCopiesItself(t *testing.T) {
	dir := t.TempDir()
	if code := installRunner([]string{dir}); code != 0 {
		t.Fatalf("install-runner exited %d", code)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "stackpilot-runner")
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the copy has %d bytes, the binary %d", len(got), len(want))
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("mode %v, %v; want 0555", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the folder, want the runner only", len(entries))
	}
	if code := installRunner(nil); code != 2 {
		t.Errorf("install-runner without a folder exited %d, want 2", code)
	}
}

// runner pod refuses to start without all of its flags.
func TestRunnerPodNeedsItsFlags(t *testing.T) {
	if code := runnerPod([]string{"--endpoint", "https://127.0.0.1:1"}); code != 2 {
		t.Errorf("runner pod with flags missing exited %d, want 2", code)
	}
}
