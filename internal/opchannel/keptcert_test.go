package opchannel

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The certificate a controller made is the one it serves after a restart
// (so the Pods of adopted Jobs still trust it), until the endpoint names
// another host.
func TestKeepSelfSignedSurvivesARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runner-tls")
	if err := KeepSelfSigned(dir, "https://10.88.0.1:9444"); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if err := KeepSelfSigned(dir, "https://10.88.0.1:9444"); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if !bytes.Equal(first, again) {
		t.Fatal("a restart made a new certificate: the Pods of adopted Jobs would refuse it")
	}
	_, caPEM, err := Listen("127.0.0.1:0", "https://10.88.0.1:9444", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(caPEM, first) {
		t.Fatal("Listen does not serve the kept certificate")
	}
	if err := KeepSelfSigned(dir, "https://stackpilot-runner.stackpilot-system.svc:9444"); err != nil {
		t.Fatal(err)
	}
	moved, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if bytes.Equal(first, moved) {
		t.Fatal("the certificate was kept for an endpoint it does not name")
	}
}
