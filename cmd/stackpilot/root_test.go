package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the command line in-process, as main does, with stdout and
// stderr captured apart.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runWithInput(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRootExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"version"}, 0, "stackpilot ", ""},
		{[]string{"completion", "bash"}, 0, "bash completion V2 for stackpilot", ""},
		{[]string{"completion", "zsh"}, 0, "#compdef stackpilot", ""},
		{[]string{"completion", "fish"}, 0, "complete -c stackpilot", ""},
		{[]string{"completion", "tcsh"}, 2, "", `stackpilot: no completion for shell "tcsh": want bash, zsh or fish`},
		{[]string{"completion"}, 2, "", "Run 'stackpilot completion --help' for usage."},
		{[]string{"version", "x"}, 2, "", "stackpilot: version takes no arguments"},
		{[]string{"--bogus"}, 2, "", "stackpilot: unknown flag: --bogus"},
		{[]string{"versoin"}, 2, "", "did you mean version?"},
		{[]string{"artifact"}, 2, "", "stackpilot: artifact needs a command"},
		{[]string{"artifact", "nope"}, 2, "", `unknown command "nope" for "stackpilot artifact"`},
		{nil, 2, "", "Usage: stackpilot <command> [flags]"},
		{[]string{"--help"}, 0, "kubeconfig", ""},
		// What the completion scripts call.
		{[]string{"__complete", "artifact", "p"}, 0, "push\tPackage a program folder", ""},
		{[]string{"__complete", "artifact", "list", "oci://r/x", "-o", ""}, 0, "table\njson\nyaml\n", ""},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.errs) {
			t.Errorf("stackpilot %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout with %q, stderr with %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.errs)
		}
	}
}

const testKubeconfig = `apiVersion: v1
kind: Config
current-context: one
clusters:
- name: one
  cluster: {server: "https://one.example:6443"}
- name: two
  cluster: {server: "https://two.example:6443"}
users:
- name: u
  user: {token: not-a-real-token}
contexts:
- name: one
  context: {cluster: one, user: u, namespace: infra}
- name: two
  context: {cluster: two, user: u}
`

// TestKubeOptions checks the shared helper later verbs use: the kubeconfig
// from KUBECONFIG or --kubeconfig, --context and -n as kubectl reads them.
func TestKubeOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	for _, tc := range []struct {
		name       string
		opts       kubeOptions
		host, ns   string
		errContain string
	}{
		{"KUBECONFIG, current context", kubeOptions{}, "https://one.example:6443", "infra", ""},
		{"--context", kubeOptions{context: "two"}, "https://two.example:6443", "default", ""},
		{"-n", kubeOptions{namespace: "platform"}, "https://one.example:6443", "platform", ""},
		{"--kubeconfig", kubeOptions{kubeconfig: path, context: "two", namespace: "x"}, "https://two.example:6443", "x", ""},
		{"unknown context", kubeOptions{context: "three"}, "", "", `context "three"`},
		{"missing file", kubeOptions{kubeconfig: filepath.Join(t.TempDir(), "nope")}, "", "", "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.opts.RESTConfig()
			if tc.errContain != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errContain) {
					t.Fatalf("got %v, want an error with %q", err, tc.errContain)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ns, err := tc.opts.Namespace()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host || ns != tc.ns {
				t.Errorf("host %q namespace %q, want %q %q", cfg.Host, ns, tc.host, tc.ns)
			}
			if _, err := tc.opts.Client(); err != nil {
				t.Errorf("Client: %v", err)
			}
		})
	}
}

// TestKubeOptionsNoConfig: without any kubeconfig the message says what to set.
func TestKubeOptionsNoConfig(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var o kubeOptions
	_, err := o.RESTConfig()
	if err == nil || !strings.Contains(err.Error(), "set KUBECONFIG") {
		t.Fatalf("got %v, want the no-kubeconfig message", err)
	}
}

// TestVersionStamped: the version a release build stamps is what version prints.
func TestVersionStamped(t *testing.T) {
	code, out, _ := runBinary(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "stackpilot "+testVersion+" (go") {
		t.Errorf("stackpilot version: exit %d, %q", code, out)
	}
}
