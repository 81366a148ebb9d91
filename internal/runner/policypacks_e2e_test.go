package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// writePack writes a policy pack folder of the runtime.
func writePack(t *testing.T, runtime string) string {
	t.Helper()
	dir := t.TempDir()
	text := "name: guard\nruntime: " + runtime + "\ndescription: a pack\n"
	if err := os.WriteFile(filepath.Join(dir, "PulumiPolicy.yaml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunPolicyPackUnsupported: a pack whose runtime has no language host
// here fails the up before any Pulumi process starts, naming the pack, the
// runtime and what to change; a folder with no PulumiPolicy.yaml too.
func TestRunPolicyPackUnsupported(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, "name: packs\nruntime: yaml\noutputs:\n  x: \"1\"\n")
	spec := e.spec(OpUp)
	spec.PolicyPacks = []PolicyPack{{Name: "org-rules", Dir: writePack(t, "nodejs")}}
	res := e.run(spec)
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorPolicyPack))
	g.Expect(res.Message).To(Equal(`policy pack "org-rules" (runtime nodejs): the runner's image has no pulumi-language-nodejs on PATH, ` +
		`so Pulumi cannot run the pack; run the Stack with the Job executor and a spec.runner.image that has the nodejs ` +
		`language host and the pack's dependencies (for example pulumi/pulumi-nodejs), or remove the pack`))
	g.Expect(res.PulumiProcesses).To(BeZero(), "nothing ran")

	spec = e.spec(OpPreview)
	spec.PolicyPacks = []PolicyPack{{Name: "empty", Dir: t.TempDir()}}
	res = e.run(spec)
	g.Expect(res.ErrorClass).To(Equal(ErrorPolicyPack))
	g.Expect(res.Message).To(ContainSubstring(`policy pack "empty": its folder has no PulumiPolicy.yaml`))

	// Other operations do not run packs, so they do not refuse them.
	spec = e.spec(OpRefresh)
	spec.PolicyPacks = []PolicyPack{{Name: "org-rules", Dir: writePack(t, "nodejs")}}
	g.Expect(e.run(spec).ErrorClass).NotTo(Equal(ErrorPolicyPack))
}

// TestPolicyPackArgs: every pack goes to the CLI after the runner's own
// analyzer; once one has a configuration every one gets one.
func TestPolicyPackArgs(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	o := &operation{spec: Spec{Type: OpUp, PolicyPacks: []PolicyPack{
		{Name: "a", Dir: "/packs/a"}, {Name: "b", Dir: "/packs/b", Config: []byte(`{"no-public":{"enforcementLevel":"advisory"}}`)},
	}}}
	args, err := o.policyPackArgs([]string{"--save-plan", "/p.json", "--policy-pack", "/own"}, dir)
	g.Expect(err).NotTo(HaveOccurred())
	cfg := func(i string) string { return filepath.Join(dir, "policy-pack-config-"+i+".json") }
	g.Expect(args).To(Equal([]string{"--save-plan", "/p.json",
		"--policy-pack", "/own", "--policy-pack-config", cfg("0"),
		"--policy-pack", "/packs/a", "--policy-pack-config", cfg("1"),
		"--policy-pack", "/packs/b", "--policy-pack-config", cfg("2")}))
	for i, want := range []string{"{}", "{}", `{"no-public":{"enforcementLevel":"advisory"}}`} {
		b, err := os.ReadFile(cfg(string(rune('0' + i))))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal(want))
	}

	// Without a configuration, no --policy-pack-config at all.
	o.spec.PolicyPacks[1].Config = nil
	args, err = o.policyPackArgs(nil, dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(args).To(Equal([]string{"--policy-pack", "/packs/a", "--policy-pack", "/packs/b"}))
	g.Expect(slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "config") })).To(BeFalse())
}

// TestRunPolicyPackReachesEngine: a pack whose language host the runner has
// passes the check and is run by the engine, through that host (Pulumi
// v3.276 runs a pack folder with the host's RunPlugin). The one host here
// is YAML's, which serves components, not analyzers, so Pulumi's own error
// ends the preview: the pack was handed to the engine, with its
// configuration. (Node.js and Python hosts, which run CrossGuard packs, are
// not served where these tests run.)
func TestRunPolicyPackReachesEngine(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, "name: packs\nruntime: yaml\noutputs:\n  x: \"1\"\n")
	spec := e.spec(OpPreview)
	spec.PolicyPacks = []PolicyPack{{Name: "yaml-pack", Dir: writePack(t, "yaml"), Config: []byte(`{"rule":{"enforcementLevel":"advisory"}}`)}}
	res := e.run(spec)
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).NotTo(Equal(ErrorPolicyPack))
	g.Expect(res.Message).To(ContainSubstring("unknown service pulumirpc.Analyzer"), "the engine asked the pack for its analyzer")
}
