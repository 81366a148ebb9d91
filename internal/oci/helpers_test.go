package oci

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// writeTree writes files (path -> content; a mode prefix "x:" makes it
// executable) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		mode := os.FileMode(0o644)
		if len(content) > 1 && content[:2] == "x:" {
			mode, content = 0o755, content[2:]
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func program(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Pulumi.yaml":       "name: demo\nruntime: yaml\n",
		"resources/cm.yaml": "kind: ConfigMap\n",
		"scripts/run.sh":    "x:#!/bin/sh\necho hi\n",
	})
	return dir
}

func newTestClient(reg *testenv.Registry) *Client {
	return &Client{Insecure: true}
}

func ref(reg *testenv.Registry, repoTag string) Reference {
	r, err := ParseReference("oci://" + reg.Host() + "/" + repoTag)
	if err != nil {
		panic(err)
	}
	return r
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
