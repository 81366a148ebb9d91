package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestPlanArgs(t *testing.T) {
	g := NewWithT(t)
	o := &operation{spec: Spec{Type: OpPreview, StackName: "dev", ID: "op", Plan: "/data/plans/p.json"}}
	g.Expect(o.engineArgs("/tmp/log")).To(ContainElements("preview", "--save-plan", "/data/plans/p.json"))
	o.spec.Type = OpUp
	args := o.engineArgs("/tmp/log")
	// --skip-preview combines with --plan: the engine checks the steps against
	// the given plan, it needs no preview of its own.
	g.Expect(args).To(ContainElements("up", "--yes", "--skip-preview", "--plan", "/data/plans/p.json"))
	g.Expect(args).NotTo(ContainElement("--save-plan"))
	for _, typ := range []OperationType{OpRefresh, OpDestroy, OpDriftCheck} {
		o.spec.Type = typ
		g.Expect(o.engineArgs("/tmp/log")).NotTo(ContainElement(ContainSubstring("plan")), string(typ))
	}
	o.spec = Spec{Type: OpUp, StackName: "dev", ID: "op"}
	g.Expect(o.engineArgs("/tmp/log")).NotTo(ContainElement(ContainSubstring("plan")), "no plan, no flag")
}

// The texts are those of Pulumi v3.276 (pkg/resource/deploy), as the runner's
// event collector turns them into diagnostics.
func TestClassifyPlanViolation(t *testing.T) {
	op := func() error { return stepErr(phaseOperation, errors.New("exit status 255")) }
	for _, tc := range []struct {
		name string
		f    failure
		want string
	}{
		{"changed inputs", failure{err: op(), diags: []string{
			"warning: using pulumi-resource-kubernetes from $PATH at /bin/pulumi-resource-kubernetes",
			"kubernetes:core/v1:ConfigMap (managed): resource urn:pulumi:dev::p::kubernetes:core/v1:ConfigMap::managed " +
				"violates plan: properties changed: ~~data[{map[greeting:{bonjour}]}!={map[greeting:{hola}]}]",
		}}, "the plan is no longer valid: kubernetes:core/v1:ConfigMap (managed): resource " +
			"urn:pulumi:dev::p::kubernetes:core/v1:ConfigMap::managed violates plan: properties changed: " +
			"~~data[{map[greeting:{bonjour}]}!={map[greeting:{hola}]}]"},
		{"unplanned create and a missed step", failure{err: op(), diags: []string{
			"kubernetes:core/v1:ConfigMap (extra): create is not allowed by the plan: no steps were expected for this resource",
			"expected resource operations for urn:pulumi:dev::p::kubernetes:core/v1:ConfigMap::b but none were seen",
			"update failed",
		}}, "the plan is no longer valid: kubernetes:core/v1:ConfigMap (extra): create is not allowed by the plan: " +
			"no steps were expected for this resource\n" +
			"expected resource operations for urn:pulumi:dev::p::kubernetes:core/v1:ConfigMap::b but none were seen"},
		{"only on stderr", failure{err: op(), stderr: "Updating (dev)\n" +
			"    error: resource violates plan: properties changed: +~outputs[{x}]\n"},
			"the plan is no longer valid: resource violates plan: properties changed: +~outputs[{x}]"},
		{"not taken for auth", failure{err: op(), diags: []string{
			"resource urn:pulumi:dev::p::x:y:Z::a violates plan: properties changed: ~~code[{401}!={403}]",
		}}, "the plan is no longer valid: resource urn:pulumi:dev::p::x:y:Z::a violates plan: " +
			"properties changed: ~~code[{401}!={403}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			outcome, class := classify(tc.f)
			g.Expect(outcome).To(Equal(OutcomeFailed))
			g.Expect(class).To(Equal(ErrorPlanInvalid))
			g.Expect(message(tc.f, class)).To(Equal(tc.want))
		})
	}

	// A program error of an up with a plan stays a program error.
	g := NewWithT(t)
	f := failure{err: op(), diags: []string{"kubernetes:core/v1:ConfigMap (managed): the plan for this is bad"}}
	_, class := classify(f)
	g.Expect(class).To(Equal(ErrorProgram))
	// Outside the engine run (reading the plan file) it is not a violation either.
	f = failure{err: stepErr(phaseStack, errors.New("x")), stderr: "error: resource violates plan: nope\n"}
	_, class = classify(f)
	g.Expect(class).To(Equal(ErrorBackend))
}

func TestRunMissingPlanFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: p\nruntime: yaml\n"), 0o600)).To(Succeed())
	spec := Spec{ID: "op", Type: OpUp, WorkDir: dir, StackName: "dev", Backend: "file://" + t.TempDir(),
		Plan: filepath.Join(dir, "gone.json")}
	res := Run(context.Background(), spec)
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorPlanInvalid))
	g.Expect(res.Message).To(Equal(planInvalidPrefix + "the plan file " + spec.Plan +
		" cannot be read (no such file or directory); run a new preview to make a new plan"))
	g.Expect(res.PulumiProcesses).To(BeZero(), "nothing ran")

	spec.Plan = dir // a directory
	res = Run(context.Background(), spec)
	g.Expect(res.ErrorClass).To(Equal(ErrorPlanInvalid))
	g.Expect(res.Message).To(ContainSubstring("not a regular file"))

	// A preview writes the plan: its folder is made, an earlier plan removed.
	spec.Type, spec.Plan = OpPreview, filepath.Join(dir, "plans", "new.json")
	g.Expect(preparePlanFile(spec)).To(Succeed())
	g.Expect(filepath.Join(dir, "plans")).To(BeADirectory())
	g.Expect(os.WriteFile(spec.Plan, []byte("{}"), 0o600)).To(Succeed())
	g.Expect(preparePlanFile(spec)).To(Succeed())
	g.Expect(spec.Plan).NotTo(BeAnExistingFile())
}
