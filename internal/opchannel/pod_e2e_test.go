package opchannel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// These tests run RunPod in-process against a real TLS server on loopback,
// with the real pinned Pulumi CLI and YAML language host from bin/, found on
// PATH as in a runner Pod.

const program = `name: chan
runtime: yaml
variables:
  shared:
    fn::readFile: ../shared/data.txt
outputs:
  shared: ${shared}
  x: 1
`

// pulumiOnPath puts bin/ first on PATH and returns the environment the
// pinned CLI needs off the network, plus the passphrase.
func pulumiOnPath(t *testing.T) map[string]string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the Pulumi CLI")
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.RequireBinaries(bin, "pulumi", "pulumi-language-yaml"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	env := testenv.PulumiEnv(bin)
	env["PULUMI_CONFIG_PASSPHRASE"] = "correct horse battery staple"
	return env
}

func runPod(t *testing.T, c *channel, op Operation) (PodOptions, runner.Result) {
	t.Helper()
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.srv.Unregister(op.ID) })
	o := c.podOptions(op.ID, cred)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := RunPod(ctx, o); err != nil {
		t.Fatalf("RunPod: %v", err)
	}
	res := c.result(op.ID)
	t.Logf("%s: outcome=%s class=%s changes=%+v cache=%q message=%q", op.ID, res.Outcome, res.ErrorClass, res.Changes, res.DependencyCache, res.Message)
	return o, res
}

// An up in a "Pod": the tree arrives whole (the program reads a file beside
// its folder), the result comes back through Result, and the engine log and
// the counts land in the controller's files.
func TestRunPodUp(t *testing.T) {
	env := pulumiOnPath(t)
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"prog/Pulumi.yaml": program, "shared/data.txt": "from the tree"})
	backend := "file://" + filepath.Join(t.TempDir(), "state")
	op := newOp(t, "op-up", tree, digest, runner.Spec{Type: runner.OpUp, WorkDir: "prog", StackName: "dev",
		Backend: backend, Env: env, Timeout: runner.Duration(5 * time.Minute),
		// The controller's own paths: never used by the Pod.
		PulumiHome: "/nonexistent/home", PulumiCommand: "/nonexistent/pulumi"})

	o, res := runPod(t, c, op)
	if res.Outcome != runner.OutcomeSucceeded {
		t.Fatalf("up: %+v", res)
	}
	if got := res.Outputs["shared"].Value; got != "from the tree" {
		t.Errorf("output shared = %v, want the file beside the program", got)
	}
	podLog := fileText(t, filepath.Join(o.WorkRoot, engineLog))
	if got := fileText(t, op.LogFile); got == "" || got != podLog || !strings.Contains(got, "Outputs:") {
		t.Errorf("the controller's engine log (%d bytes) is not the Pod's (%d bytes):\n%s", len(got), len(podLog), got)
	}
	p, err := runner.ReadProgress(op.ProgressFile)
	if err != nil || p == nil || p.ID != op.ID {
		t.Errorf("progress: %+v, %v", p, err)
	} else if p.Changes != res.Changes {
		t.Errorf("the last progress %+v is not the result's counts %+v", p.Changes, res.Changes)
	}
	if _, err := os.Stat(filepath.Join(o.WorkRoot, pulumiHome)); err != nil {
		t.Errorf("PULUMI_HOME is not the Pod's: %v", err)
	}
}

// A preview saves its plan on the controller through the channel, and an up
// applies that plan, fetched the same way.
func TestRunPodPlan(t *testing.T) {
	env := pulumiOnPath(t)
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"prog/Pulumi.yaml": program, "shared/data.txt": "planned"})
	backend := "file://" + filepath.Join(t.TempDir(), "state")
	plan := filepath.Join(t.TempDir(), "plans", "p1.json")
	spec := runner.Spec{WorkDir: "prog", StackName: "dev", Backend: backend, Env: env, Plan: plan,
		Timeout: runner.Duration(5 * time.Minute)}

	spec.Type = runner.OpPreview
	if _, res := runPod(t, c, newOp(t, "op-preview", tree, digest, spec)); res.Outcome != runner.OutcomeSucceeded {
		t.Fatalf("preview: %+v", res)
	}
	if fi, err := os.Stat(plan); err != nil || fi.Size() == 0 {
		t.Fatalf("the preview's plan is not on the controller: %v", err)
	}
	// An up fetches the plan: without one on the controller it applies nothing.
	spec.Type = runner.OpUp
	missing := spec
	missing.Plan = filepath.Join(t.TempDir(), "none.json")
	if _, res := runPod(t, c, newOp(t, "op-apply-missing", tree, digest, missing)); res.ErrorClass != runner.ErrorPlanInvalid {
		t.Fatalf("up without its plan: %+v", res)
	}
	if _, res := runPod(t, c, newOp(t, "op-apply", tree, digest, spec)); res.Outcome != runner.OutcomeSucceeded {
		t.Fatalf("up with the plan: %+v", res)
	}
}
