package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestArtifactPasswordPrompt: without COSIGN_PASSWORD, on a terminal, the
// password is asked (twice for keygen) without echo. script(1) gives the
// built binary a pseudo-terminal; the test types each answer once the
// prompt is shown.
func TestArtifactPasswordPrompt(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to run the CLI on a pseudo-terminal")
	}
	bin, err := cliBinary()
	if err != nil {
		t.Fatalf("building stackpilot: %v", err)
	}
	const password = "typed-Passw0rd"
	for _, tc := range []struct {
		name    string
		answers []string
		code    int
		want    string
	}{
		{"same twice", []string{password, password}, 0, "Wrote "},
		{"different", []string{password, "other"}, 1, "stackpilot: the two passwords differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "keys")
			cmd := exec.Command(script, "-qec", bin+" artifact keygen --output-dir "+dir, "/dev/null")
			cmd.Env = append(os.Environ(), "TERM=dumb")
			cmd.Env = removeEnv(cmd.Env, passwordEnv)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Generous: making the key (scrypt) takes seconds, and far
			// longer on a loaded machine; this only ends a hung prompt.
			timer := time.AfterFunc(5*time.Minute, func() { _ = cmd.Process.Kill() })
			defer timer.Stop()
			var seen strings.Builder
			r := bufio.NewReader(stdout)
			for _, answer := range tc.answers {
				if err := readUntil(r, &seen, ": "); err != nil {
					t.Fatalf("waiting for the prompt: %v; output so far %q", err, seen.String())
				}
				// The prompt is printed just before echo is turned off
				// (term.ReadPassword does that): a person cannot type in
				// between, a test can.
				time.Sleep(300 * time.Millisecond)
				if _, err := io.WriteString(stdin, answer+"\n"); err != nil {
					t.Fatal(err)
				}
			}
			rest, _ := io.ReadAll(r)
			seen.Write(rest)
			err := cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			out := seen.String()
			if code != tc.code || !strings.Contains(out, tc.want) || !strings.Contains(out, "Password for the new private key: ") {
				t.Errorf("exit %d, output %q; want exit %d and %q", code, out, tc.code, tc.want)
			}
			if strings.Contains(out, password) {
				t.Errorf("the password was echoed: %q", out)
			}
			if tc.code != 0 {
				return
			}
			// The key opens with the password typed.
			t.Setenv(passwordEnv, password)
			c := &cli{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
			if _, err := c.loadSigner(filepath.Join(dir, "cosign.key")); err != nil {
				t.Errorf("the key does not open with the typed password: %v", err)
			}
		})
	}
}

func readUntil(r *bufio.Reader, seen *strings.Builder, suffix string) error {
	for !strings.HasSuffix(seen.String(), suffix) {
		b, err := r.ReadByte()
		if err != nil {
			return err
		}
		seen.WriteByte(b)
	}
	return nil
}

func removeEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}
