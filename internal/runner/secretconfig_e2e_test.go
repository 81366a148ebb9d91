package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// argsWrapper puts a pulumi in front of the real one that appends its whole
// command line to a log: what any user of the host reads in
// /proc/<pid>/cmdline while it runs.
func argsWrapper(t *testing.T, e *e2e) (path string, cmdlines func() string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "cmdlines")
	path = filepath.Join(dir, "pulumi")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\nexec %q \"$@\"\n", log, filepath.Join(e.bin, "pulumi"))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, func() string {
		data, _ := os.ReadFile(log)
		return string(data)
	}
}

// TestRunSecretConfigNeverOnACommandLine: on a backend whose state only the
// CLI reads (the file backend read through the CLI alone, as s3 or
// postgres are), the secret config values of every operation reach the
// program, and never a pulumi command line: encrypted in process with the
// state's salt, or, for a secrets provider the runner cannot encrypt for,
// one value per call on the CLI's stdin.
//
// Not parallel: it sets readFileState and encryptInProcess, which every Run
// reads.
func TestRunSecretConfigNeverOnACommandLine(t *testing.T) {
	for _, inProcess := range []bool{true, false} {
		t.Run(fmt.Sprintf("encrypted in process %v", inProcess), func(t *testing.T) {
			g := NewWithT(t)
			readFileState, encryptInProcess = false, inProcess
			defer func() { readFileState, encryptInProcess = true, true }()
			e := newE2E(t, configProgram+"  vaultPem: ${vault.pem}\n")
			wrapper, cmdlines := argsWrapper(t, e)
			const token, password = "s3cr3t-t0ken-on-no-cmdline", "vault-passw0rd-on-no-cmdline"
			pem := "-----BEGIN KEY-----\nline-one-of-the-key\n-----END KEY-----\n"
			config := []ConfigValue{
				{Key: "settings", Value: map[string]any{"name": "web", "tags": []any{"a"}}},
				{Key: "replicas", Value: 2},
				{Key: "token", Value: token, Secret: true},
				{Key: "vault", Value: map[string]any{"port": 8200, "password": password, "pem": pem}, Secret: true},
			}
			for i := range 2 { // the first creates the stack; the second has the salt in the state only
				spec := e.spec(OpUp, config...)
				spec.PulumiCommand = wrapper
				res := e.run(spec)
				g.Expect(res.Outcome).To(Equal(OutcomeSucceeded), "up %d: %s", i, res.Message)
				g.Expect(res.Outputs).To(HaveKeyWithValue("token", Output{Value: token, Secret: true}))
				g.Expect(res.Outputs).To(HaveKeyWithValue("vaultPort", Output{Value: "8200", Secret: true}))
				// The exact value, its trailing newline included.
				g.Expect(res.Outputs).To(HaveKeyWithValue("vaultPem", Output{Value: pem, Secret: true}))
			}
			logged := cmdlines()
			g.Expect(logged).To(ContainSubstring("up"))
			for _, v := range []string{token, password, "line-one-of-the-key"} {
				g.Expect(logged).NotTo(ContainSubstring(v))
			}
			if !inProcess {
				g.Expect(logged).To(ContainSubstring("config set --stack dev --secret --raw"), "the stdin path ran")
			}
			g.Expect(strings.Count(logged, "config set-all")).To(BeZero())
		})
	}
}
