package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// runCosign runs the real cosign CLI (bin/cosign, built by `make tools`)
// offline: a temp HOME and TUF root, no Rekor, no Fulcio.
func runCosign(t *testing.T, password string, args ...string) (string, error) {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Skipf("bin/ not found: %v", err)
	}
	path := filepath.Join(bin, "cosign")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("bin/cosign is missing (build it with `make tools`): %v", err)
	}
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COSIGN_PASSWORD=" + password,
		"TUF_ROOT=" + filepath.Join(home, "tuf"), "SIGSTORE_NO_CACHE=true", "DOCKER_CONFIG=" + filepath.Join(home, "docker"),
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// TestArtifactCosignInterop: what `push --sign-key` writes verifies with
// `cosign verify`, and a key from `artifact keygen` signs with `cosign sign`
// so that `artifact verify` accepts it.
func TestArtifactCosignInterop(t *testing.T) {
	isolate(t)
	reg := testenv.NewRegistry(t)
	const password = "interop-Passw0rd"
	t.Setenv(passwordEnv, password)
	keys := t.TempDir()
	mustRun(t, "artifact", "keygen", "--output-dir", keys)
	key, pub := filepath.Join(keys, "cosign.key"), filepath.Join(keys, "cosign.pub")
	repo := reg.Host() + "/org/infra"

	out, _ := mustRun(t, "artifact", "push", "oci://"+repo+":ours", "--path", writeProgram(t, t.TempDir()), "--insecure", "--sign-key", key)
	ours := strings.TrimSpace(out)
	if out, err := runCosign(t, "", "verify", "--key", pub, "--insecure-ignore-tlog=true", "--allow-insecure-registry", repo+"@"+ours); err != nil {
		t.Fatalf("cosign verify of push --sign-key: %v\n%s", err, out)
	}

	out, _ = mustRun(t, "artifact", "push", "oci://"+repo+":theirs", "--path", writeProgram(t, t.TempDir()), "--insecure", "--created", "2026-01-01T00:00:00Z")
	theirs := strings.TrimSpace(out)
	if out, err := runCosign(t, password, "sign", "--key", key, "--tlog-upload=false", "--use-signing-config=false", "--allow-insecure-registry", "-y", repo+"@"+theirs); err != nil {
		t.Fatalf("cosign sign with the keygen key: %v\n%s", err, out)
	}
	mustRun(t, "artifact", "verify", "oci://"+repo+":theirs", "--insecure", "--key", pub)
}
