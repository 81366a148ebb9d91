package convert

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// stackConv is the conversion of one PKO Stack: the fields still to read, the
// Stack being built and the Secrets made from literal values.
type stackConv struct {
	c      *converter
	meta   pkoMeta
	fields map[string]json.RawMessage
	out    stackObject
	// literal values, by the generated Secret they go to
	envLiterals, configLiterals map[string]string
	// templateIdentity: the workspace template named the ServiceAccount,
	// which carried over (identity.go).
	templateIdentity bool
	err              error
}

// Names of the Secrets a conversion makes from PKO literal values: one per
// use, because envFrom and configFrom take every key of a Secret.
func envSecretName(stack string) string    { return stack + "-converted-env" }
func configSecretName(stack string) string { return stack + "-converted-config" }
func gitSecretName(stack string) string    { return stack + "-converted-git" }

// secretKeyPattern is what a Secret or ConfigMap data key may be.
var secretKeyPattern = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// stackNamePattern is what spec.stackName may be: the Stack CRD's
// validation rule (api/v1alpha1, StackSpec.StackName), which the API server
// enforces; a test keeps the two equal.
var stackNamePattern = regexp.MustCompile(`^([A-Za-z0-9_.-]+/){0,2}[A-Za-z0-9_.-]{1,100}$`)

// envPrefixPattern is what spec.envFrom[].prefix may be.
var envPrefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c *converter) convertStack(obj pkoObject) error {
	s := &stackConv{c: c, meta: obj.Metadata, fields: map[string]json.RawMessage{},
		envLiterals: map[string]string{}, configLiterals: map[string]string{}}
	if obj.Metadata.Name == "" {
		return fmt.Errorf("a pulumi.com Stack has no metadata.name")
	}
	if len(obj.Spec) > 0 {
		if err := json.Unmarshal(obj.Spec, &s.fields); err != nil {
			return fmt.Errorf("%s: spec is not an object: %w", objectName("Stack", obj.Metadata), err)
		}
	}
	s.out = stackObject{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.StackKind, Metadata: carriedMeta(obj.Metadata)}
	s.convert()
	if s.err != nil {
		return s.err
	}
	if len(s.configLiterals) > 0 {
		c.res.Objects = append(c.res.Objects, s.literalSecret(configSecretName(s.meta.Name), s.configLiterals))
	}
	if len(s.envLiterals) > 0 {
		c.res.Objects = append(c.res.Objects, s.literalSecret(envSecretName(s.meta.Name), s.envLiterals))
	}
	c.res.Objects = append(c.res.Objects, s.out)
	return nil
}

// carriedMeta keeps name, namespace, labels and annotations, less what only
// kubectl or PKO reads.
func carriedMeta(m pkoMeta) pkoMeta {
	out := pkoMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels}
	for k, v := range m.Annotations {
		if k == "kubectl.kubernetes.io/last-applied-configuration" || strings.Contains(k, pkoGroup+"/") {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out
}

func (s *stackConv) literalSecret(name string, data map[string]string) secretObject {
	return secretObject{APIVersion: "v1", Kind: "Secret", Type: "Opaque", StringData: data,
		Metadata: pkoMeta{Name: name, Namespace: s.meta.Namespace, Labels: s.meta.Labels}}
}

// take reads spec.<key> into v and marks it handled; false when absent.
func (s *stackConv) take(key string, v any) bool {
	raw, ok := s.fields[key]
	if !ok {
		return false
	}
	delete(s.fields, key)
	if string(raw) == "null" {
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil && s.err == nil {
		s.err = fmt.Errorf("%s: spec.%s: %w", objectName("Stack", s.meta), key, err)
	}
	return s.err == nil
}

func (s *stackConv) warn(field, format string, args ...any) {
	s.c.res.Warnings = append(s.c.res.Warnings, Warning{
		Object: objectName("Stack", s.meta), Field: field, Why: fmt.Sprintf(format, args...)})
}

func (s *stackConv) convert() {
	spec := &s.out.Spec
	s.convertSource()

	var stack string
	if s.take("stack", &stack) {
		spec.StackName = stack
		s.checkStackName(stack)
	}
	s.take("backend", &spec.Backend)
	s.take("config", &spec.Config)
	s.convertConfigRefs()
	s.convertEnv()
	s.convertBackendDefault()
	s.convertSecretsProvider()

	s.take("refresh", &spec.Refresh)
	var targets []string
	s.take("targets", &targets)
	for _, t := range targets {
		if strings.HasPrefix(t, "urn:pulumi:") {
			spec.Targets = append(spec.Targets, t)
		} else {
			s.warn("spec.targets", "%q is not a URN; Stackpilot targets resources by URN (urn:pulumi:...), so it was left out", t)
		}
	}
	var b bool
	if s.take("targetDependents", &b) && b {
		s.warn("spec.targetDependents", "no equivalent: Stackpilot runs targeted operations with the targets and what they depend on, not their dependents; list the dependents in spec.targets")
	}
	s.take("destroyOnFinalize", &spec.DestroyOnDelete)
	var secs int64
	if s.take("resyncFrequencySeconds", &secs) {
		// PKO treats anything below 60 seconds as 60.
		spec.Interval = metav1.Duration{Duration: time.Duration(max(secs, 60)) * time.Second}
	}
	s.convertServiceAccount()
	var prereqs []pkoPrerequisite
	s.take("prerequisites", &prereqs)
	for i, p := range prereqs {
		spec.DependsOn = append(spec.DependsOn, v1alpha1.DependencyReference{Name: p.Name})
		if p.Requirement != nil && p.Requirement.SucceededWithinDuration != "" {
			s.warn(fmt.Sprintf("spec.prerequisites[%d].requirement.succeededWithinDuration", i),
				"no equivalent: spec.dependsOn waits until Stack %s is Ready at its latest generation, however long ago it succeeded", p.Name)
		}
	}
	if s.take("preview", &b) && b {
		spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalPreviewOnly}
	}
	s.dropped()
}

// dropped warns about every field left: those with no Stackpilot equivalent,
// with the reason, and those this converter does not know.
func (s *stackConv) dropped() {
	reasons := map[string]string{
		"workspaceTemplate":              "pods are configured on the controller (its executor and flags), not per Stack; resources, images and volumes of PKO workspaces have no per-Stack equivalent",
		"workspaceReclaimPolicy":         "Stackpilot keeps no workspace between operations: each runs in a fresh work directory",
		"updateTemplate":                 "Stackpilot has no Update objects: operations are recorded in status.history",
		"environment":                    "Pulumi ESC environments are not read by Stackpilot; put the values in a Secret or ConfigMap and list it in spec.configFrom or spec.envFrom",
		"retryMaxBackoffDurationSeconds": "no equivalent: failures are retried from spec.retryInterval with a backoff bounded by spec.interval",
		"continueResyncOnCommitMatch":    "no equivalent: Stackpilot runs an up when the revision or the inputs change; to re-apply changes made outside Pulumi use spec.driftDetection.mode: Remediate",
		"expectNoRefreshChanges":         "no equivalent (PKO v2 ignores it too)",
		"runProgram":                     "no equivalent: a destroy on deletion runs without the program, from the last applied revision",
		"retryOnUpdateConflict":          "no equivalent: a stack locked by another update is retried with the failure backoff",
		"useLocalStackOnly":              "no equivalent: Stackpilot creates the stack when it does not exist",
		"shallow":                        "no equivalent: the controller fetches only the revision it needs",
	}
	keys := make([]string, 0, len(s.fields))
	for k := range s.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if string(s.fields[k]) == "null" || string(s.fields[k]) == "false" {
			continue // an explicit default says nothing to carry over
		}
		why, ok := reasons[k]
		if !ok {
			why = "not a field this converter knows (PKO v2 pulumi.com/v1 Stack); left out"
		}
		if k == "workspaceTemplate" && s.templateIdentity {
			why += " (its serviceAccountName carried over to spec.serviceAccountName)"
		}
		s.warn("spec."+k, "%s", why)
	}
}

// convertSource reads the Git fields, fluxSource or programRef into
// spec.source.
func (s *stackConv) convertSource() {
	src := &s.out.Spec.Source
	var repo, branch, commit, repoDir string
	s.take("projectRepo", &repo)
	s.take("branch", &branch)
	s.take("commit", &commit)
	s.take("repoDir", &repoDir)
	if repo != "" {
		src.Git = &v1alpha1.GitSource{URL: repo}
		switch {
		case commit != "":
			src.Git.Ref = &v1alpha1.GitRef{Commit: commit}
			if branch != "" {
				s.warn("spec.branch", "left out: Stackpilot checks out either a branch or a commit, and spec.commit pins %s", commit)
			}
		case branch != "":
			src.Git.Ref = &v1alpha1.GitRef{Branch: strings.TrimPrefix(branch, "refs/heads/")}
		}
		src.Dir = strings.Trim(repoDir, "/")
		s.convertGitAuth()
	} else {
		for _, f := range [][2]string{{"branch", branch}, {"commit", commit}, {"repoDir", repoDir}} {
			if f[1] != "" {
				s.warn("spec."+f[0], "left out: it belongs to a Git source and spec.projectRepo is not set")
			}
		}
	}

	var flux pkoFluxSource
	if s.take("fluxSource", &flux) {
		if src.Git != nil {
			s.warn("spec.fluxSource", "left out: spec.projectRepo is set too and a Stack has one source")
		} else {
			src.SourceRef = &v1alpha1.FluxSourceReference{Kind: flux.SourceRef.Kind, Name: flux.SourceRef.Name}
			src.Dir = strings.Trim(flux.Dir, "/")
			if g, _, _ := strings.Cut(flux.SourceRef.APIVersion, "/"); g != "" && g != "source.toolkit.fluxcd.io" {
				s.warn("spec.fluxSource.sourceRef.apiVersion", "%s is not a Flux source API; Stackpilot follows source.toolkit.fluxcd.io/v1 GitRepository, OCIRepository, Bucket and ExternalArtifact", flux.SourceRef.APIVersion)
			}
		}
	}

	var prog struct {
		Name string `json:"name"`
	}
	if s.take("programRef", &prog) {
		if src.Git != nil || src.SourceRef != nil {
			s.warn("spec.programRef", "left out: another source is set too and a Stack has one source")
		} else {
			s.convertProgramRef(prog.Name)
		}
	}
	if src.Git == nil && src.SourceRef == nil && src.OCI == nil {
		s.err = fmt.Errorf("%s: no source: set spec.projectRepo, spec.fluxSource or spec.programRef", objectName("Stack", s.meta))
	}
}

// convertProgramRef points the Stack at the converted Program's directory.
func (s *stackConv) convertProgramRef(name string) {
	src := &s.out.Spec.Source
	p, ok := s.c.program(s.meta.Namespace, name)
	dir := name
	if ok {
		dir = p.Dir
	} else {
		s.warn("spec.programRef", "Program %s is not in the input, so its directory %s/ was not written; convert it too (kubectl get programs.pulumi.com %s -o yaml)", name, dir, name)
	}
	src.Dir = dir
	url := s.c.opts.ProgramURL
	switch {
	case strings.HasPrefix(url, "oci://"):
		src.OCI = &v1alpha1.OCISource{URL: url}
		if s.c.opts.ProgramRef != "" {
			src.OCI.Ref = &v1alpha1.OCIRef{Tag: s.c.opts.ProgramRef}
		}
	case url != "":
		ref := s.c.opts.ProgramRef
		if ref == "" {
			ref = "main"
		}
		src.Git = &v1alpha1.GitSource{URL: url, Ref: &v1alpha1.GitRef{Branch: ref}}
	default:
		src.Git = &v1alpha1.GitSource{URL: PlaceholderProgramURL, Ref: &v1alpha1.GitRef{Branch: "main"}}
		s.warn("spec.programRef", "Stackpilot has no Program kind: commit the program directory %s/ to a Git repository (or push it with `stackpilot artifact push`) and replace spec.source.git.url %s, or convert again with --program-url", dir, PlaceholderProgramURL)
	}
}

// convertBackendDefault keeps PKO's default backend, Pulumi Cloud, which is
// not Stackpilot's (the controller's --default-backend), and warns about a
// file:// backend: it named a path inside PKO's workspace Pod, and names one
// on the controller's filesystem now.
func (s *stackConv) convertBackendDefault() {
	if s.out.Spec.Backend == "" {
		s.out.Spec.Backend = "https://api.pulumi.com"
	}
	if strings.HasPrefix(s.out.Spec.Backend, "file://") {
		s.warn("spec.backend", "%s was a path inside PKO's workspace Pod (on a volume of its workspaceTemplate, or the Pod's own disk); "+
			"in Stackpilot it is a path on the controller's filesystem, shared by every Stack it runs and lost with its Pod unless it is on a persistent volume: "+
			"move the state to a durable backend (s3://, azblob://, gs://, postgres://, https://api.pulumi.com; `pulumi stack export` then `pulumi stack import`), "+
			"or mount that path from a PersistentVolumeClaim in the controller's Deployment", s.out.Spec.Backend)
	}
}

// checkStackName warns about a stack name the API server will refuse (PKO
// took any string; its examples use placeholders such as <your-org>/...):
// it is copied all the same, so the refusal names it and nothing silently
// targets another stack.
func (s *stackConv) checkStackName(name string) {
	if stackNamePattern.MatchString(name) {
		return
	}
	s.warn("spec.stack", "%q is not a stack name Stackpilot accepts (up to 100 letters, digits, '-', '_' or '.', optionally prefixed by 'org/' or 'org/project/'), "+
		"so the API server will refuse this Stack: set spec.stackName to the real stack (a placeholder such as <your-org> from PKO's examples is not one)", name)
}

// convertSecretsProvider carries the passphrase provider over; PKO's cloud
// KMS providers have no Stackpilot equivalent.
func (s *stackConv) convertSecretsProvider() {
	var provider string
	if !s.take("secretsProvider", &provider) || provider == "" || provider == "passphrase" || provider == "default" {
		return
	}
	s.warn("spec.secretsProvider", "%s is not supported: Stackpilot encrypts secrets with the passphrase provider (spec.secretsProvider.passphraseSecretRef) or the Pulumi Cloud backend's own; existing stacks must be moved with `pulumi stack change-secrets-provider passphrase` first", provider)
}
