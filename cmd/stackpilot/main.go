// Command stackpilot is Stackpilot's command-line tool: one cobra tree with
// kubectl's kubeconfig flags (see root.go and kube.go), one file per verb
// group:
//
//	stackpilot artifact push|pull|list|tag|diff|sign|verify|keygen   Pulumi programs as OCI artifacts
//	stackpilot drift check|show STACK   run a drift check now, print the last report
//	stackpilot plan STACK | approve STACK [--plan ID] [--wait]   review and approve a pending plan
//	stackpilot get stacks [-A] [--watch] | status | history | events | outputs STACK   see Stacks
//	stackpilot convert -f FILE [--program-dir DIR]   Pulumi Kubernetes Operator v2 manifests to Stackpilot's
//	stackpilot policy test -f POLICY.yaml --plan FILE [--state FILE]   policy rules against a saved update plan
//	stackpilot check [--pre] | install [--export] | uninstall [--yes]   check, install, remove Stackpilot
//	stackpilot version | completion bash|zsh|fish
//
// Exit codes: 0 ok, 1 failure, 2 usage, 3 drift found (drift check), no pending plan (plan, approve) or a
// mandatory policy violation (policy test).
// It links no test scaffolding and nothing of the dev module (deps_test.go checks) and runs anywhere;
// the demo is its own binary, dev/cmd/stackpilot-demo. docs/cli.md documents every verb.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit code; tests call it
// in-process with captured output.
func run(args []string, stdout, stderr io.Writer) int {
	return runWithInput(args, os.Stdin, stdout, stderr)
}

func runWithInput(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	root := c.newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	return c.exitCode(cmd, err)
}
