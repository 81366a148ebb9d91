package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestArtifactCredentials: --creds, else the Docker config file
// (DOCKER_CONFIG); a wrong password fails saying which registry, without
// the password.
func TestArtifactCredentials(t *testing.T) {
	isolate(t)
	const user, pass, wrong = "ci", "right-Passw0rd", "wr0ng-Passw0rd"
	reg := testenv.NewRegistry(t, testenv.WithRegistryBasicAuth(user, pass))
	src := writeProgram(t, t.TempDir())
	ref := "oci://" + reg.Host() + "/org/private:v1"

	code, out, errOut := runCLI(t, "artifact", "push", ref, "--path", src, "--insecure", "--creds", user+":"+wrong)
	if code != 1 || out != "" || !strings.Contains(errOut, "stackpilot: ") || !strings.Contains(errOut, reg.Host()) {
		t.Errorf("wrong password: exit %d, stdout %q, stderr %q; want exit 1 naming the registry", code, out, errOut)
	}
	if strings.Contains(errOut, wrong) || strings.Contains(errOut, pass) {
		t.Errorf("the error shows a password: %q", errOut)
	}
	code, _, errOut = runCLI(t, "artifact", "push", ref, "--path", src, "--creds", user+":"+pass)
	if code != 1 || !strings.Contains(errOut, "refusing plain HTTP") || !strings.Contains(errOut, "pass --insecure") {
		t.Errorf("a plain-HTTP registry without --insecure: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "artifact", "list", "oci://"+reg.Host()+"/org/private", "--insecure")
	if code != 1 || !strings.Contains(errOut, "requires credentials") {
		t.Errorf("anonymous: exit %d, %q", code, errOut)
	}

	mustRun(t, "artifact", "push", ref, "--path", src, "--insecure", "--creds", user+":"+pass)

	// The Docker config file, as `docker login` writes it.
	cfg := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"auths":{"`+reg.Host()+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfg)
	out, _ = mustRun(t, "artifact", "list", "oci://"+reg.Host()+"/org/private", "--insecure", "-o", "json")
	if !strings.Contains(out, `"tag": "v1"`) {
		t.Errorf("list with the Docker config: %s", out)
	}
	// --creds wins over the file.
	code, _, errOut = runCLI(t, "artifact", "pull", ref, "--output", filepath.Join(t.TempDir(), "o"), "--insecure", "--creds", user+":"+wrong)
	if code != 1 || strings.Contains(errOut, wrong) {
		t.Errorf("--creds over the Docker config: exit %d, %q", code, errOut)
	}
}

// TestArtifactUsageErrors: a wrong command line is exit 2 with a message
// that says what to fix, before any request.
func TestArtifactUsageErrors(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"artifact", "push", "oci://127.0.0.1:1/a:v1"}, `required flag(s) "path" not set`},
		{[]string{"artifact", "push", "127.0.0.1:1/a:v1", "--path", dir}, `must start with "oci://"`},
		{[]string{"artifact", "push", "oci://127.0.0.1:1/a", "--path", dir}, "add a tag"},
		{[]string{"artifact", "push", "oci://127.0.0.1:1/a@sha256:" + strings.Repeat("0", 64), "--path", dir}, "give a tag"},
		{[]string{"artifact", "push", "oci://127.0.0.1:1/a:v1", "--path", dir, "--created", "yesterday"}, `--created "yesterday": want "now" or an RFC 3339 time`},
		{[]string{"artifact", "push", "oci://127.0.0.1:1/a:v1", "--path", dir, "--annotation", "novalue"}, `--annotation "novalue": want key=value`},
		{[]string{"artifact", "push", "oci://127.0.0.1:1/a:v1", "--path", dir, "--creds", "nocolon"}, "--creds: invalid credentials: want USERNAME:PASSWORD"},
		{[]string{"artifact", "push", "oci://127.0.0.1:1/a:v1", "oci://127.0.0.1:1/b:v1", "--path", dir}, "push takes one reference"},
		{[]string{"artifact", "pull", "oci://127.0.0.1:1/a:v1"}, `required flag(s) "output" not set`},
		{[]string{"artifact", "pull", "oci://127.0.0.1:1/a:v1", "-o", dir, "--max-size", "big"}, `--max-size "big"`},
		{[]string{"artifact", "list", "oci://127.0.0.1:1/a:v1"}, "give the repository only"},
		{[]string{"artifact", "list", "oci://127.0.0.1:1/a", "-o", "xml"}, `-o "xml": want table, json or yaml`},
		{[]string{"artifact", "tag", "oci://127.0.0.1:1/a:v1"}, "tag takes a reference and the new tag"},
		{[]string{"artifact", "tag", "oci://127.0.0.1:1/a:v1", "bad tag!"}, `new tag "bad tag!"`},
		{[]string{"artifact", "diff", "oci://127.0.0.1:1/a:v1"}, `required flag(s) "path" not set`},
		{[]string{"artifact", "push", "oci://127.0.0.1:1/a:v1", "--path", dir, "--bogus"}, "unknown flag: --bogus"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "stackpilot: "+tc.msg) && !strings.Contains(errOut, tc.msg) || !strings.Contains(errOut, "--help' for usage") {
			t.Errorf("stackpilot %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.msg)
		}
	}
}
