package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// pulumiWrapper puts a pulumi in front of the real one that appends its
// command line to a log, one line a process, and returns a function that
// returns (and clears) the commands logged so far: "stack init", "up", ...
func pulumiWrapper(t *testing.T, e *e2e) (path string, started func() []string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	path = filepath.Join(dir, "pulumi")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\nexec %q \"$@\"\n", log, filepath.Join(e.bin, "pulumi"))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, func() []string {
		data, _ := os.ReadFile(log)
		_ = os.Remove(log)
		var cmds []string
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				cmds = append(cmds, commandName(strings.Fields(strings.TrimPrefix(l, "--non-interactive "))))
			}
		}
		return cmds
	}
}

// TestRunStartsOnePulumiProcessPerOperation counts, from the processes
// themselves, what each operation starts: one pulumi process in the steady
// state, two when the stack is created, none to read outputs from a file://
// backend; with secret config and a secret output, whose values still reach
// only the Result.
//
// Not parallel: it sets readFileState, which every Run reads; the sequential
// tests end before the parallel ones start.
func TestRunStartsOnePulumiProcessPerOperation(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("state read directly %v", direct), func(t *testing.T) {
			g := NewWithT(t)
			readFileState = direct
			defer func() { readFileState = true }()
			e := newE2E(t, configProgram)
			wrapper, started := pulumiWrapper(t, e)
			config := []ConfigValue{
				{Key: "settings", Value: map[string]any{"name": "web", "tags": []any{"a"}}},
				{Key: "replicas", Value: 2},
				{Key: "token", Value: "s3cr3t-t0ken", Secret: true},
				{Key: "vault", Value: map[string]any{"port": 8200}, Secret: true},
			}
			held := false // what the controller passes once an up succeeded
			run := func(typ OperationType, config ...ConfigValue) Result {
				spec := e.spec(typ, config...)
				spec.PulumiCommand = wrapper
				spec.Claim, spec.ClaimHeld = "team/web", held
				res := e.run(spec)
				held = true
				g.Expect(res.Outcome).To(Equal(OutcomeSucceeded), "%s: %s", typ, res.Message)
				return res
			}
			want := map[string]Output{
				"name": {Value: "web"}, "firstTag": {Value: "a"}, "replicas": {Value: float64(2)},
				"token": {Value: "s3cr3t-t0ken", Secret: true}, "vaultPort": {Value: "8200", Secret: true},
			}

			first := run(OpUp, config...)
			g.Expect(first.Outputs).To(Equal(want))
			steady := run(OpUp, config...)
			g.Expect(steady.Outputs).To(Equal(want))
			if direct {
				g.Expect(started()).To(Equal([]string{"stack init", "up", "up"}))
			} else {
				// The CLI-only path: the stack is found missing by the first call, the
				// claim goes through the CLI, the secret outputs through one export;
				// the secrets are encrypted in process, with the salt `stack init`
				// wrote on the first run, with the salt an export of the state
				// gives after it (no secret value on a command line); the claim
				// is read again at every operation, held or not (a claim lost to
				// an interleaved one is found at the next).
				g.Expect(started()).To(Equal([]string{
					"stack tag", "stack init", "stack tag", "stack tag", "stack tag", "up", "stack export",
					"stack tag", "stack export", "up", "stack export",
				}))
			}
			g.Expect(first.PulumiProcesses + steady.PulumiProcesses).To(Equal(map[bool]int{true: 3, false: 11}[direct]))

			run(OpPreview, config...)
			run(OpRefresh, config...)
			run(OpDriftCheck, config...)
			read := run(OpOutputs)
			g.Expect(read.Outputs).To(Equal(want))
			run(OpDestroy, config...)
			if direct {
				g.Expect(started()).To(Equal([]string{"preview", "refresh", "refresh", "destroy"}))
			} else {
				g.Expect(started()).To(Equal([]string{
					"stack tag", "stack export", "preview", "stack tag", "stack export", "refresh",
					"stack tag", "stack export", "refresh", "stack tag", "stack export",
					"stack tag", "stack export", "destroy",
				}))
			}
		})
	}
}
