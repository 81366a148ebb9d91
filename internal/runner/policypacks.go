package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Pulumi policy packs (Spec.PolicyPacks, spec.policyPacks) run in the
// engine beside the runner's own analyzer. The pinned CLI (v3.276,
// pkg/resource/plugin's ExecPlugin) runs a pack folder through its
// language host: `pulumi-language-<runtime>`'s RunPlugin, found where the
// CLI finds plugins. An image without that host would fail the engine run
// with "loading runtime: ... no language plugin" after the program had
// started; the runner looks first and refuses with what to change.

// PolicyPackError says why a policy pack cannot run in this runner: no
// PulumiPolicy.yaml in its folder, or no language host for its runtime.
// Nothing ran.
type PolicyPackError struct {
	Pack    string
	Runtime string // empty when the project file is the problem
	Reason  string
}

func (e *PolicyPackError) Error() string {
	if e.Runtime == "" {
		return fmt.Sprintf("policy pack %q: %s", e.Pack, e.Reason)
	}
	return fmt.Sprintf("policy pack %q (runtime %s): %s", e.Pack, e.Runtime, e.Reason)
}

// policyPacksApply: only ups and previews run policy packs.
func (o *operation) policyPacksApply() bool {
	return len(o.spec.PolicyPacks) > 0 && (o.spec.Type == OpUp || o.spec.Type == OpPreview)
}

// checkPolicyPacks refuses a pack this runner cannot run, before any
// process starts.
func (o *operation) checkPolicyPacks() error {
	if !o.policyPacksApply() {
		return nil
	}
	path := pathOf(o.cli.env)
	for _, p := range o.spec.PolicyPacks {
		if !filepath.IsAbs(p.Dir) {
			return &SpecError{Reason: fmt.Sprintf("policy pack %q: dir must be absolute", p.Name)}
		}
		runtime, err := policyPackRuntime(p.Dir)
		if errors.Is(err, os.ErrNotExist) {
			return &PolicyPackError{Pack: p.Name, Reason: "its folder has no PulumiPolicy.yaml: point spec.policyPacks[].source.dir at the pack's folder"}
		}
		if err != nil {
			return &PolicyPackError{Pack: p.Name, Reason: fmt.Sprintf("PulumiPolicy.yaml: %v", err)}
		}
		host := "pulumi-language-" + runtime
		if !onPath(path, host) {
			return &PolicyPackError{Pack: p.Name, Runtime: runtime, Reason: fmt.Sprintf(
				"the runner's image has no %s on PATH, so Pulumi cannot run the pack; run the Stack with the Job executor and a spec.runner.image that has the %s language host and the pack's dependencies (for example pulumi/pulumi-%s), or remove the pack",
				host, runtime, imageHint(runtime))}
		}
	}
	return nil
}

// policyPackRuntime reads the runtime of the pack in dir: PulumiPolicy.yaml's
// runtime, a name or {name, options}, as Pulumi's workspace package reads it.
func policyPackRuntime(dir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "PulumiPolicy.yaml"))
	if err != nil {
		return "", err
	}
	var proj struct {
		Runtime any `json:"runtime"`
	}
	if err := yaml.Unmarshal(raw, &proj); err != nil {
		return "", fmt.Errorf("not YAML: %v", err)
	}
	var name string
	switch r := proj.Runtime.(type) {
	case string:
		name = r
	case map[string]any:
		name, _ = r["name"].(string)
	}
	if name == "" || strings.ContainsAny(name, `/\`) {
		return "", errors.New("runtime is missing or not a runtime name (nodejs, python, go, ...)")
	}
	return name, nil
}

// policyPackArgs are the CLI arguments of the packs, after own (the
// runner's analyzer, when it runs): Pulumi wants a --policy-pack-config
// for every --policy-pack as soon as one has one, so a pack without
// configuration gets an empty one.
func (o *operation) policyPackArgs(own []string, dir string) ([]string, error) {
	if !o.policyPacksApply() {
		return own, nil
	}
	var packs, configs []string
	hasConfig := false
	for i := 0; i+1 < len(own); i++ {
		if own[i] == "--policy-pack" {
			packs = append(packs, own[i+1])
			configs = append(configs, "")
		}
	}
	rest := withoutPolicyPacks(own)
	for _, p := range o.spec.PolicyPacks {
		packs = append(packs, p.Dir)
		configs = append(configs, string(p.Config))
		hasConfig = hasConfig || len(p.Config) > 0
	}
	args := rest
	for i, p := range packs {
		args = append(args, "--policy-pack", p)
		if !hasConfig {
			continue
		}
		text := configs[i]
		if text == "" {
			text = "{}"
		}
		f := filepath.Join(dir, fmt.Sprintf("policy-pack-config-%d.json", i))
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--policy-pack-config", f)
	}
	return args, nil
}

// withoutPolicyPacks is args without its --policy-pack pairs.
func withoutPolicyPacks(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--policy-pack" && i+1 < len(args) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// imageHint is the suffix of Pulumi's official image for a runtime.
func imageHint(runtime string) string {
	switch runtime {
	case "nodejs", "python", "go", "dotnet", "java":
		return runtime
	}
	return "<language>"
}

// pathOf is the PATH of an environment.
func pathOf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			return v
		}
	}
	return ""
}

// onPath says whether an executable named name is in one of path's folders.
func onPath(path, name string) bool {
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			continue
		}
		fi, err := os.Stat(filepath.Join(d, name))
		if err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
