package convert

import (
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func convertString(t *testing.T, in string, opts Options) *Result {
	t.Helper()
	res, err := Convert(strings.NewReader(in), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// stacks returns the converted Stacks by name and the generated Secrets.
func stacks(res *Result) (map[string]v1alpha1.StackSpec, map[string]map[string]string) {
	st, sec := map[string]v1alpha1.StackSpec{}, map[string]map[string]string{}
	for _, o := range res.Objects {
		switch o := o.(type) {
		case stackObject:
			st[o.Metadata.Name] = o.Spec
		case secretObject:
			sec[o.Metadata.Name] = o.StringData
		}
	}
	return st, sec
}

func warnedFields(res *Result) []string {
	var out []string
	for _, w := range res.Warnings {
		out = append(out, w.Field)
	}
	return out
}

func TestConvertGitStackEveryField(t *testing.T) {
	g := NewWithT(t)
	res := convertString(t, `
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: web, namespace: infra, labels: {team: web}, annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", pulumi.com/reconciliation-request: x, note: kept}}
spec:
  stack: org/web/dev
  projectRepo: https://github.com/org/infra
  branch: refs/heads/main
  repoDir: /app/
  gitAuth:
    basicAuth:
      userName: {type: Secret, secret: {name: git, key: username}}
      password: {type: Secret, secret: {name: git, key: password}}
  backend: s3://state
  config: {aws:region: us-east-1, size: 3, tags: {team: web}}
  configRef: {color: {name: settings, key: color}}
  secretsRef:
    token: {type: Secret, secret: {name: creds, key: token}}
    dbPass: {type: Literal, literal: {value: hunter2}}
  envRefs:
    PULUMI_CONFIG_PASSPHRASE: {type: Secret, secret: {name: pass, key: pp}}
    AWS_ACCESS_KEY_ID: {type: Secret, secret: {name: aws, key: AWS_ACCESS_KEY_ID}}
    TF_VAR_x: {type: Secret, secret: {name: aws, key: x}}
    DEBUG: {type: Literal, literal: {value: "1"}}
  secretsProvider: passphrase
  refresh: true
  targets: ["urn:pulumi:dev::web::kubernetes:core/v1:ConfigMap::cm"]
  destroyOnFinalize: true
  resyncFrequencySeconds: 30
  serviceAccountName: deployer
  prerequisites: [{name: network}]
  preview: true
  shallow: false
`, Options{})
	g.Expect(res.Warnings).To(BeEmpty())
	st, sec := stacks(res)
	s := st["web"]
	g.Expect(s.StackName).To(Equal("org/web/dev"))
	g.Expect(s.Source.Git).To(Equal(&v1alpha1.GitSource{URL: "https://github.com/org/infra",
		Ref: &v1alpha1.GitRef{Branch: "main"}, SecretRef: &v1alpha1.LocalObjectReference{Name: "git"}}))
	g.Expect(s.Source.Dir).To(Equal("app"))
	g.Expect(s.Backend).To(Equal("s3://state"))
	g.Expect(s.Config).To(Equal(map[string]apiextensionsv1.JSON{
		"aws:region": {Raw: []byte(`"us-east-1"`)}, "size": {Raw: []byte(`3`)}, "tags": {Raw: []byte(`{"team":"web"}`)}}))
	g.Expect(s.ConfigFrom).To(Equal([]v1alpha1.ConfigFromSource{
		{ConfigMapRef: &v1alpha1.OptionalObjectReference{Name: "settings"}, Keys: []string{"color"}},
		{SecretRef: &v1alpha1.OptionalObjectReference{Name: "creds"}, Keys: []string{"token"}},
		{SecretRef: &v1alpha1.OptionalObjectReference{Name: "web-converted-config"}},
	}))
	g.Expect(sec["web-converted-config"]).To(Equal(map[string]string{"dbPass": "hunter2"}))
	g.Expect(s.EnvFrom).To(Equal([]v1alpha1.EnvFromSource{
		{SecretRef: &v1alpha1.OptionalObjectReference{Name: "aws"}},
		{Prefix: "TF_VAR_", SecretRef: &v1alpha1.OptionalObjectReference{Name: "aws"}},
		{SecretRef: &v1alpha1.OptionalObjectReference{Name: "web-converted-env"}},
	}))
	g.Expect(sec["web-converted-env"]).To(Equal(map[string]string{"DEBUG": "1"}))
	g.Expect(s.SecretsProvider.PassphraseSecretRef).To(Equal(&v1alpha1.SecretKeyRef{Name: "pass", Key: "pp"}))
	g.Expect(s.Refresh).To(BeTrue())
	g.Expect(s.Targets).To(Equal([]string{"urn:pulumi:dev::web::kubernetes:core/v1:ConfigMap::cm"}))
	g.Expect(s.DestroyOnDelete).To(BeTrue())
	g.Expect(s.Interval.Duration.Seconds()).To(Equal(60.0), "PKO's floor of 60s")
	g.Expect(s.ServiceAccountName).To(Equal("deployer"))
	g.Expect(s.DependsOn).To(Equal([]v1alpha1.DependencyReference{{Name: "network"}}))
	g.Expect(s.Approval.Mode).To(Equal(v1alpha1.ApprovalPreviewOnly))

	out, err := res.YAML()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("note: kept"))
	g.Expect(string(out)).To(ContainSubstring("team: web"))
	g.Expect(string(out)).NotTo(ContainSubstring("last-applied"))
	g.Expect(string(out)).NotTo(ContainSubstring("reconciliation-request"))
	g.Expect(string(out)).NotTo(ContainSubstring("status"))
}

func TestConvertWarnsForEachDroppedField(t *testing.T) {
	g := NewWithT(t)
	res := convertString(t, `
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: web, namespace: infra}
spec:
  stack: dev
  projectRepo: https://github.com/org/infra
  commit: 0123456789abcdef0123456789abcdef01234567
  branch: main
  configRef:
    aws:profile: {name: settings, key: profile}
    renamed: {name: settings, key: other}
    obj: {name: settings, key: obj, json: true}
  secretsRef:
    fromEnv: {type: Env, env: {name: X}}
    fromFile: {type: FS, filesystem: {path: /x}}
    other: {type: Secret, secret: {namespace: elsewhere, name: s, key: other}}
  envRefs:
    FOO: {type: Secret, secret: {name: s, key: bar}}
  secretsProvider: awskms://alias/x
  targets: [not-a-urn]
  targetDependents: true
  prerequisites: [{name: net, requirement: {succeededWithinDuration: 1h}}]
  workspaceTemplate: {spec: {image: x}}
  workspaceReclaimPolicy: Delete
  updateTemplate: {spec: {ttlAfterCompleted: 1h}}
  environment: [org/env]
  retryMaxBackoffDurationSeconds: 60
  continueResyncOnCommitMatch: true
  expectNoRefreshChanges: true
  runProgram: true
  retryOnUpdateConflict: true
  useLocalStackOnly: true
  shallow: true
  accessTokenSecret: token
  somethingNew: 1
`, Options{})
	g.Expect(warnedFields(res)).To(ConsistOf(
		"spec.branch", "spec.configRef[aws:profile]", "spec.configRef[renamed]", "spec.configRef[obj].json",
		"spec.secretsRef[fromEnv]", "spec.secretsRef[fromFile]", "spec.secretsRef[other].secret.namespace",
		"spec.envRefs[FOO]", "spec.secretsProvider", "spec.targets", "spec.targetDependents",
		"spec.prerequisites[0].requirement.succeededWithinDuration", "spec.workspaceTemplate",
		"spec.workspaceReclaimPolicy", "spec.updateTemplate", "spec.environment",
		"spec.retryMaxBackoffDurationSeconds", "spec.continueResyncOnCommitMatch",
		"spec.expectNoRefreshChanges", "spec.runProgram", "spec.retryOnUpdateConflict",
		"spec.useLocalStackOnly", "spec.shallow", "spec.accessTokenSecret", "spec.somethingNew",
	))
	for _, w := range res.Warnings {
		g.Expect(w.Object).To(Equal("Stack infra/web"))
		g.Expect(len(w.Why)).To(BeNumerically(">", 20), "%s says why", w.Field)
	}
	g.Expect(res.Warnings[0].String()).To(HavePrefix("Stack infra/web: spec."))
	st, _ := stacks(res)
	g.Expect(st["web"].Source.Git.Ref).To(Equal(&v1alpha1.GitRef{Commit: "0123456789abcdef0123456789abcdef01234567"}))
	g.Expect(st["web"].ConfigFrom).To(Equal([]v1alpha1.ConfigFromSource{
		{ConfigMapRef: &v1alpha1.OptionalObjectReference{Name: "settings"}, Keys: []string{"obj"}}}))
	g.Expect(st["web"].Backend).To(Equal("https://api.pulumi.com"), "PKO's default backend")
}

func TestConvertProgramAndProgramRef(t *testing.T) {
	g := NewWithT(t)
	in := `
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: page, namespace: infra}
spec:
  stack: dev
  programRef: {name: staticpage}
  envRefs:
    PULUMI_CONFIG_PASSPHRASE: {type: Literal, literal: {value: pp}}
---
apiVersion: pulumi.com/v1
kind: Program
metadata: {name: staticpage, namespace: infra}
program:
  configuration: {color: {type: String, default: blue}}
  resources: {cm: {type: "kubernetes:core/v1:ConfigMap", properties: {data: {color: "${color}"}}}}
  outputs: {name: "${cm.metadata.name}"}
`
	res := convertString(t, in, Options{ProgramURL: "https://git.example/org/programs.git"})
	g.Expect(res.Warnings).To(BeEmpty())
	g.Expect(res.Programs).To(HaveLen(1))
	g.Expect(res.Programs[0].Dir).To(Equal("staticpage"))
	g.Expect(string(res.Programs[0].PulumiYAML)).To(HavePrefix("name: staticpage\nruntime: yaml\n"))
	g.Expect(string(res.Programs[0].PulumiYAML)).To(ContainSubstring("color: ${color}"))
	g.Expect(string(res.Programs[0].PulumiYAML)).To(ContainSubstring("default: blue"))
	st, sec := stacks(res)
	g.Expect(st["page"].Source).To(Equal(v1alpha1.StackSource{Dir: "staticpage",
		Git: &v1alpha1.GitSource{URL: "https://git.example/org/programs.git", Ref: &v1alpha1.GitRef{Branch: "main"}}}))
	g.Expect(st["page"].SecretsProvider.PassphraseSecretRef).To(Equal(&v1alpha1.SecretKeyRef{Name: "page-converted-env", Key: "PULUMI_CONFIG_PASSPHRASE"}))
	g.Expect(sec["page-converted-env"]).To(HaveKeyWithValue("PULUMI_CONFIG_PASSPHRASE", "pp"))

	oci := convertString(t, in, Options{ProgramURL: "oci://ghcr.io/org/programs", ProgramRef: "v1"})
	st, _ = stacks(oci)
	g.Expect(st["page"].Source.OCI).To(Equal(&v1alpha1.OCISource{URL: "oci://ghcr.io/org/programs", Ref: &v1alpha1.OCIRef{Tag: "v1"}}))

	// Without a URL the Stack gets a placeholder and a warning that says what to do.
	none := convertString(t, in, Options{})
	st, _ = stacks(none)
	g.Expect(st["page"].Source.Git.URL).To(Equal(PlaceholderProgramURL))
	g.Expect(warnedFields(none)).To(Equal([]string{"spec.programRef"}))
	g.Expect(none.Warnings[0].Why).To(ContainSubstring("--program-url"))
}

func TestConvertFluxSourceAndGitAuth(t *testing.T) {
	g := NewWithT(t)
	res := convertString(t, `
apiVersion: v1
kind: List
items:
- apiVersion: pulumi.com/v1
  kind: Stack
  metadata: {name: flux, namespace: infra}
  spec:
    stack: dev
    branch: main
    fluxSource: {sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: OCIRepository, name: repo}, dir: app}
- apiVersion: pulumi.com/v1
  kind: Stack
  metadata: {name: lit, namespace: infra}
  spec:
    stack: dev
    projectRepo: https://github.com/org/infra
    gitAuth: {accessToken: {type: Literal, literal: {value: tok}}}
- apiVersion: pulumi.com/v1
  kind: Stack
  metadata: {name: ssh, namespace: infra}
  spec:
    stack: dev
    projectRepo: ssh://git@github.com/org/infra
    gitAuth: {sshAuth: {sshPrivateKey: {type: Secret, secret: {name: key, key: id_rsa}}}}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: passthrough, namespace: infra}
  data: {a: b}
- apiVersion: auto.pulumi.com/v1alpha1
  kind: Workspace
  metadata: {name: ws, namespace: infra}
`, Options{})
	st, sec := stacks(res)
	g.Expect(st["flux"].Source).To(Equal(v1alpha1.StackSource{Dir: "app",
		SourceRef: &v1alpha1.FluxSourceReference{Kind: "OCIRepository", Name: "repo"}}))
	g.Expect(st["lit"].Source.Git.SecretRef.Name).To(Equal("lit-converted-git"))
	g.Expect(sec["lit-converted-git"]).To(Equal(map[string]string{"username": "git", "password": "tok"}))
	g.Expect(st["ssh"].Source.Git.SecretRef.Name).To(Equal("key"))
	g.Expect(warnedFields(res)).To(ConsistOf("spec.branch", "spec.gitAuth.sshAuth", "kind"))
	var passthrough bool
	for _, o := range res.Objects {
		if m, ok := o.(map[string]any); ok && m["kind"] == "ConfigMap" {
			passthrough = true
		}
	}
	g.Expect(passthrough).To(BeTrue(), "documents of other kinds pass through")
}

func TestConvertRejectsWhatItCannotRead(t *testing.T) {
	for name, in := range map[string]string{
		"no source": "apiVersion: pulumi.com/v1\nkind: Stack\nmetadata: {name: x}\nspec: {stack: dev}\n",
		"bad field": "apiVersion: pulumi.com/v1\nkind: Stack\nmetadata: {name: x}\nspec: {stack: [1], projectRepo: https://h/r}\n",
		"not k8s":   "just: yaml\n",
		"not yaml":  "a: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Convert(strings.NewReader(in), Options{})
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

// The output is a manifest the API server reads: JSON-compatible YAML with
// the Stack's group and kind.
func TestConvertOutputYAML(t *testing.T) {
	g := NewWithT(t)
	res := convertString(t, "apiVersion: pulumi.com/v1\nkind: Stack\nmetadata: {name: x, namespace: ns}\nspec: {stack: dev, projectRepo: https://h/r}\n", Options{})
	out, err := res.YAML()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(HavePrefix("apiVersion: stackpilot.dev/v1alpha1\nkind: Stack\n"))
	g.Expect(string(out)).NotTo(ContainSubstring("creationTimestamp"))
	g.Expect(string(out)).To(ContainSubstring("backend: https://api.pulumi.com"))
}

// TestConvertServiceAccount (issue 21, item 30a): under PKO the program ran
// in a workspace Pod as its ServiceAccount: the workspace template's when
// set (it is merged over the Stack's), else spec.serviceAccountName, else
// the namespace's "default". The conversion keeps that identity: without
// it the program would act as the controller, with more rights.
func TestConvertServiceAccount(t *testing.T) {
	g := NewWithT(t)
	res := convertString(t, `
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: tmpl, namespace: infra}
spec:
  stack: dev
  projectRepo: https://github.com/org/infra
  workspaceTemplate: {spec: {serviceAccountName: pulumi}}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: both, namespace: infra}
spec:
  stack: dev
  projectRepo: https://github.com/org/infra
  serviceAccountName: deployer
  workspaceTemplate:
    spec:
      serviceAccountName: pulumi
      image: pulumi/pulumi:latest
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: pod, namespace: infra}
spec:
  stack: dev
  projectRepo: https://github.com/org/infra
  workspaceTemplate: {spec: {podTemplate: {spec: {serviceAccountName: from-pod}}}}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: none, namespace: infra}
spec:
  stack: dev
  projectRepo: https://github.com/org/infra
`, Options{})
	st, _ := stacks(res)
	g.Expect(st["tmpl"].ServiceAccountName).To(Equal("pulumi"))
	g.Expect(st["both"].ServiceAccountName).To(Equal("pulumi"), "the workspace template wins, as PKO merges it over the Stack's")
	g.Expect(st["pod"].ServiceAccountName).To(Equal("from-pod"))
	g.Expect(st["none"].ServiceAccountName).To(Equal("default"), "PKO's default")
	var fields []string
	for _, w := range res.Warnings {
		fields = append(fields, w.Object+" "+w.Field)
		if w.Object == "Stack infra/both" && w.Field == "spec.serviceAccountName" {
			g.Expect(w.Why).To(ContainSubstring(`"deployer" left out: spec.workspaceTemplate.spec.serviceAccountName "pulumi" overrides it`))
		}
		if w.Field == "spec.workspaceTemplate" {
			g.Expect(w.Why).To(ContainSubstring("its serviceAccountName carried over to spec.serviceAccountName"))
		}
	}
	// Only "both" has a field left over (image) and a name that lost.
	g.Expect(fields).To(ConsistOf("Stack infra/both spec.serviceAccountName", "Stack infra/both spec.workspaceTemplate"))
}

// TestConvertProgramWithoutNamespace (issue 21, item 30b): manifests
// without namespaces (applied to the context's namespace) still pair a
// Stack with its Program, either way round.
func TestConvertProgramWithoutNamespace(t *testing.T) {
	g := NewWithT(t)
	for name, in := range map[string]string{
		"neither": "metadata: {name: page}",
		"program": "metadata: {name: page, namespace: infra}",
	} {
		res := convertString(t, `
apiVersion: pulumi.com/v1
kind: Program
metadata: {name: staticpage}
program: {resources: {}}
---
apiVersion: pulumi.com/v1
kind: Stack
`+in+`
spec: {stack: dev, programRef: {name: staticpage}}
`, Options{ProgramURL: "https://git.example/org/programs.git"})
		g.Expect(res.Warnings).To(BeEmpty(), name)
		st, _ := stacks(res)
		g.Expect(st["page"].Source.Dir).To(Equal("staticpage"), name)
	}
	// A Program of another namespace is not the Stack's.
	res := convertString(t, `
apiVersion: pulumi.com/v1
kind: Program
metadata: {name: staticpage, namespace: other}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: page, namespace: infra}
spec: {stack: dev, programRef: {name: staticpage}}
`, Options{ProgramURL: "https://git.example/org/programs.git"})
	g.Expect(warnedFields(res)).To(Equal([]string{"spec.programRef"}))
	g.Expect(res.Warnings[0].Why).To(ContainSubstring("is not in the input"))
}

// TestConvertStackName (issue 21, item 30c): a stack name the API server
// would refuse (PKO's examples use <your-org>/... placeholders) is copied
// with a warning that says what to change; a valid one is copied quietly.
func TestConvertStackName(t *testing.T) {
	g := NewWithT(t)
	res := convertString(t, `
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: bad, namespace: infra}
spec: {stack: <your-org>/nginx/dev, projectRepo: https://github.com/org/infra}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: good, namespace: infra}
spec: {stack: acme/nginx/dev, projectRepo: https://github.com/org/infra}
`, Options{})
	st, _ := stacks(res)
	g.Expect(st["bad"].StackName).To(Equal("<your-org>/nginx/dev"))
	g.Expect(st["good"].StackName).To(Equal("acme/nginx/dev"))
	g.Expect(res.Warnings).To(HaveLen(1))
	w := res.Warnings[0]
	g.Expect(w.Object + " " + w.Field).To(Equal("Stack infra/bad spec.stack"))
	g.Expect(w.Why).To(ContainSubstring(`"<your-org>/nginx/dev" is not a stack name Stackpilot accepts`))
	g.Expect(w.Why).To(ContainSubstring("the API server will refuse this Stack: set spec.stackName to the real stack"))
}

// TestStackNamePatternIsTheCRDs: the converter's check is the CRD's rule,
// so what it lets through the API server accepts.
func TestStackNamePatternIsTheCRDs(t *testing.T) {
	crd, err := os.ReadFile("../../config/crd/bases/stackpilot.dev_stacks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "self.matches('" + stackNamePattern.String() + "')"; !strings.Contains(string(crd), want) {
		t.Fatalf("the Stack CRD has no rule %s: align stackNamePattern with spec.stackName's validation in api/v1alpha1", want)
	}
}

// TestConvertFileBackend (issue 21, item 30d): a file:// backend was a path
// in PKO's workspace Pod; in Stackpilot it is the controller's filesystem.
func TestConvertFileBackend(t *testing.T) {
	g := NewWithT(t)
	res := convertString(t, `
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: local, namespace: infra}
spec: {stack: dev, projectRepo: https://github.com/org/infra, backend: "file:///state"}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: envlocal, namespace: infra}
spec:
  stack: dev
  projectRepo: https://github.com/org/infra
  envRefs: {PULUMI_BACKEND_URL: {type: Literal, literal: {value: "file://~"}}}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: s3, namespace: infra}
spec: {stack: dev, projectRepo: https://github.com/org/infra, backend: "s3://bucket"}
`, Options{})
	st, _ := stacks(res)
	g.Expect(st["local"].Backend).To(Equal("file:///state"))
	g.Expect(st["envlocal"].Backend).To(Equal("file://~"))
	var fields []string
	for _, w := range res.Warnings {
		fields = append(fields, w.Object+" "+w.Field)
		g.Expect(w.Why).To(ContainSubstring("inside PKO's workspace Pod"))
		g.Expect(w.Why).To(ContainSubstring("the controller's filesystem"))
	}
	g.Expect(fields).To(ConsistOf("Stack infra/local spec.backend", "Stack infra/envlocal spec.backend"))
}
