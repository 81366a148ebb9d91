package opchannel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// What the Pod sends of an install is what the restore makes again: links
// inside it and exec bits kept; a link out of the program's folder is never
// sent (the restore would refuse it, and it would name the Pod's files).
func TestPackDeps(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "node"), []byte("#!/bin/sh\necho v20.0.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	for name, content := range map[string]string{"Pulumi.yaml": "name: p\nruntime: nodejs\n", "package-lock.json": "{}"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := runner.PlanDeps(context.Background(), dir, t.TempDir(), nil)
	if err != nil || d == nil {
		t.Fatalf("PlanDeps: %v %v", d, err)
	}
	// What npm would have made.
	mods := filepath.Join(dir, "node_modules")
	if err := os.MkdirAll(filepath.Join(mods, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(mods, ".bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mods, "pkg", "cli.js"), []byte("#!/usr/bin/env node\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../pkg/cli.js", filepath.Join(mods, ".bin", "cli")); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "deps.tar.gz")
	if _, err := packDeps(d, archive); err != nil {
		t.Fatalf("packDeps: %v", err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	err = artifact.Untar(f, out, DepsLimits)
	f.Close()
	if err != nil {
		t.Fatalf("the archive does not unpack: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(out, "node_modules", ".bin", "cli")); err != nil || target != "../pkg/cli.js" {
		t.Errorf("the link inside: %q, %v", target, err)
	}
	if fi, err := os.Stat(filepath.Join(out, "node_modules", "pkg", "cli.js")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("the exec bit: %v, %v", fi, err)
	}

	for _, target := range []string{"/etc", "../../outside", "../.."} {
		link := filepath.Join(mods, "out")
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if _, err := packDeps(d, archive); err == nil || !strings.Contains(err.Error(), "links out") {
			t.Errorf("a link to %s: packDeps = %v, want a refusal", target, err)
		}
	}
}
