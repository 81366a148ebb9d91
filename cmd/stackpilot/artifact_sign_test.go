package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestArtifactSignVerify: keygen, push --sign-key, verify with the right
// key succeeds, with another key or unsigned fails (exit 1, saying what
// was checked); sign signs an artifact pushed unsigned; with and without
// the registry's referrers API.
func TestArtifactSignVerify(t *testing.T) {
	for _, referrers := range []bool{false, true} {
		name := "tag-schema"
		if referrers {
			name = "referrers-api"
		}
		t.Run(name, func(t *testing.T) {
			isolate(t)
			reg := testenv.NewRegistry(t, testenv.WithReferrers(referrers))
			src := writeProgram(t, t.TempDir())
			repo := "oci://" + reg.Host() + "/org/infra"
			const password = "k3y-Passw0rd"
			t.Setenv(passwordEnv, password)
			mine, other := t.TempDir(), t.TempDir()
			_, errOut := mustRun(t, "artifact", "keygen", "--output-dir", mine)
			if !strings.Contains(errOut, "key ID sha256:") || strings.Contains(errOut, password) {
				t.Errorf("keygen said %q", errOut)
			}
			mustRun(t, "artifact", "keygen", "--output-dir", other)
			if fi, err := os.Stat(filepath.Join(mine, "cosign.key")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("cosign.key: %v %v, want mode 0600", fi, err)
			}
			pem, _ := os.ReadFile(filepath.Join(mine, "cosign.key"))
			if !strings.Contains(string(pem), "ENCRYPTED SIGSTORE PRIVATE KEY") {
				t.Errorf("cosign.key is not cosign's encrypted key:\n%s", pem)
			}

			out, errOut := mustRun(t, "artifact", "push", repo+":signed", "--path", src, "--insecure", "--sign-key", filepath.Join(mine, "cosign.key"))
			if !digestLine.MatchString(out) || !strings.Contains(errOut, "Signed "+repo+"@"+strings.TrimSpace(out)) {
				t.Errorf("push --sign-key: stdout %q, stderr %q", out, errOut)
			}
			dgst := strings.TrimSpace(out)
			out, errOut = mustRun(t, "artifact", "verify", repo+":signed", "--insecure", "--key", filepath.Join(other, "cosign.pub"), "--key", filepath.Join(mine, "cosign.pub"))
			if strings.TrimSpace(out) != dgst || !strings.Contains(errOut, "by "+filepath.Join(mine, "cosign.pub")) {
				t.Errorf("verify with the right key: stdout %q, stderr %q", out, errOut)
			}
			code, _, errOut := runCLI(t, "artifact", "verify", repo+":signed", "--insecure", "--key", filepath.Join(other, "cosign.pub"))
			if code != 1 || !strings.Contains(errOut, "stackpilot: no signature of "+reg.Host()+"/org/infra@"+dgst+" verifies with the given keys") {
				t.Errorf("verify with another key: exit %d, %q", code, errOut)
			}
			// The signature tags are not artifacts: list leaves them out.
			if table, _ := mustRun(t, "artifact", "list", repo, "--insecure"); strings.Count(table, "\n") != 2 {
				t.Errorf("list after signing:\n%s", table)
			}

			// Pushed unsigned, then signed by sign.
			out, _ = mustRun(t, "artifact", "push", repo+":later", "--path", writeProgram(t, t.TempDir()), "--insecure", "--created", "now")
			later := strings.TrimSpace(out)
			code, _, errOut = runCLI(t, "artifact", "verify", repo+":later", "--insecure", "--key", filepath.Join(mine, "cosign.pub"))
			if code != 1 || !strings.Contains(errOut, "no signature found for") {
				t.Errorf("verify unsigned: exit %d, %q", code, errOut)
			}
			out, _ = mustRun(t, "artifact", "sign", repo+":later", "--insecure", "--key", filepath.Join(other, "cosign.key"))
			if strings.TrimSpace(out) != later {
				t.Errorf("sign printed %q, want %s", out, later)
			}
			mustRun(t, "artifact", "verify", repo+"@"+later, "--insecure", "--key", filepath.Join(other, "cosign.pub"))
			code, _, _ = runCLI(t, "artifact", "verify", repo+"@"+later, "--insecure", "--key", filepath.Join(mine, "cosign.pub"))
			if code != 1 {
				t.Errorf("verify of the later artifact with the first key: exit %d, want 1", code)
			}
		})
	}
}

// TestArtifactKeyPassword: COSIGN_PASSWORD, else (no terminal) an error
// saying to set it; a wrong password fails without showing it; keygen does
// not overwrite.
func TestArtifactKeyPassword(t *testing.T) {
	isolate(t)
	reg := testenv.NewRegistry(t)
	src := writeProgram(t, t.TempDir())
	dir := t.TempDir()
	ref := "oci://" + reg.Host() + "/org/infra:v1"

	code, _, errOut := runCLI(t, "artifact", "keygen", "--output-dir", dir)
	if code != 1 || !strings.Contains(errOut, "set COSIGN_PASSWORD") {
		t.Errorf("keygen without COSIGN_PASSWORD off a terminal: exit %d, %q", code, errOut)
	}
	t.Setenv(passwordEnv, "")
	mustRun(t, "artifact", "keygen", "--output-dir", dir) // an empty password, as cosign allows
	code, _, errOut = runCLI(t, "artifact", "keygen", "--output-dir", dir)
	if code != 1 || !strings.Contains(errOut, "cosign.key exists") {
		t.Errorf("keygen over a key: exit %d, %q", code, errOut)
	}

	const wrong = "n0t-the-Passw0rd"
	t.Setenv(passwordEnv, wrong)
	code, out, errOut := runCLI(t, "artifact", "push", ref, "--path", src, "--insecure", "--sign-key", filepath.Join(dir, "cosign.key"))
	if code != 1 || out != "" || !strings.Contains(errOut, "check COSIGN_PASSWORD") || strings.Contains(errOut, wrong) {
		t.Errorf("push --sign-key with a wrong password: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Nothing was pushed: the key is read first.
	if code, _, _ := runCLI(t, "artifact", "pull", ref, "--output", filepath.Join(t.TempDir(), "o"), "--insecure"); code != 1 {
		t.Errorf("push with a wrong key password pushed the artifact anyway")
	}
	os.Unsetenv(passwordEnv)
	code, _, errOut = runCLI(t, "artifact", "sign", ref, "--insecure", "--key", filepath.Join(dir, "cosign.key"))
	if code != 1 || !strings.Contains(errOut, "set COSIGN_PASSWORD") {
		t.Errorf("sign without COSIGN_PASSWORD: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "artifact", "verify", ref, "--insecure", "--key", filepath.Join(dir, "cosign.key"))
	if code != 1 || !strings.Contains(errOut, "is not a cosign public key") {
		t.Errorf("verify with the private key as --key: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "artifact", "verify", ref, "--insecure")
	if code != 2 || !strings.Contains(errOut, `required flag(s) "key" not set`) {
		t.Errorf("verify without --key: exit %d, %q", code, errOut)
	}
}
