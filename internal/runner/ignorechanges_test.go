package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"gopkg.in/yaml.v3"
)

const (
	ignCM     = "urn:pulumi:dev::web::kubernetes:core/v1:ConfigMap::cm"
	ignNamed  = "urn:pulumi:dev::web::kubernetes:core/v1:ConfigMap::app-config"
	ignSecret = "urn:pulumi:dev::web::kubernetes:core/v1:Secret::cm"
	ignChild  = "urn:pulumi:dev::web::kubernetes:yaml/v2:ConfigGroup$kubernetes:core/v1:ConfigMap::cm"
)

const ignProgram = `name: web
runtime: yaml
# a comment the rewrite keeps
resources:
  cm:
    type: kubernetes:core/v1:ConfigMap
    properties:
      data:
        a: one # and this one
  named:
    type: kubernetes:core/v1:ConfigMap
    name: app-config
    properties:
      data: {a: one}
    options:
      protect: false
      ignoreChanges: ["data.z", "data.a"]
`

// ignoreChangesOf reads options.ignoreChanges of each resource of a program file.
func ignoreChangesOf(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var prog struct {
		Resources map[string]struct {
			Options struct {
				IgnoreChanges []string `yaml:"ignoreChanges"`
			} `yaml:"options"`
		} `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &prog); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	out := map[string][]string{}
	for k, r := range prog.Resources {
		if len(r.Options.IgnoreChanges) > 0 {
			out[k] = r.Options.IgnoreChanges
		}
	}
	return out
}

func TestApplyIgnoreChanges(t *testing.T) {
	ann := `metadata.annotations["cert-manager.io/foo"]`
	for _, tc := range []struct {
		name     string
		files    map[string]string // Pulumi.yaml first
		program  string            // the file that must carry the ignores
		ignore   map[string][]string
		want     map[string][]string // options.ignoreChanges by resource key
		excluded []string
	}{{
		name:    "key match",
		files:   map[string]string{"Pulumi.yaml": ignProgram},
		program: "Pulumi.yaml",
		ignore:  map[string][]string{ignCM: {"data.a", ann}},
		want:    map[string][]string{"cm": {"data.a", ann}, "named": {"data.z", "data.a"}},
	}, {
		name:    "name match, merged with the ignoreChanges already there",
		files:   map[string]string{"Pulumi.yaml": ignProgram},
		program: "Pulumi.yaml",
		ignore:  map[string][]string{ignNamed: {"data.a", "data.b"}},
		want:    map[string][]string{"named": {"data.z", "data.a", "data.b"}},
	}, {
		name:     "no match: other type, other name, a component's child",
		files:    map[string]string{"Pulumi.yaml": ignProgram},
		program:  "Pulumi.yaml",
		ignore:   map[string][]string{ignSecret: {"data.a"}, ignChild: {"data.a"}, "urn:pulumi:dev::web::kubernetes:core/v1:ConfigMap::named": {"data.a"}, ignCM: {"data.b"}},
		want:     map[string][]string{"cm": {"data.b"}, "named": {"data.z", "data.a"}},
		excluded: []string{"urn:pulumi:dev::web::kubernetes:core/v1:ConfigMap::named", ignSecret, ignChild},
	}, {
		name:     "no paths: the resource is ignored as a whole, so excluded",
		files:    map[string]string{"Pulumi.yaml": ignProgram},
		program:  "Pulumi.yaml",
		ignore:   map[string][]string{ignCM: nil, ignNamed: {"data.a"}},
		want:     map[string][]string{"named": {"data.z", "data.a"}},
		excluded: []string{ignCM},
	}, {
		name: "non-yaml runtime",
		// Resources that would match, were it a YAML program: the runtime decides.
		files:    map[string]string{"Pulumi.yaml": strings.Replace(ignProgram, "runtime: yaml", "runtime: go", 1)},
		ignore:   map[string][]string{ignCM: {"data.a"}, ignNamed: {"data.b"}},
		excluded: []string{ignNamed, ignCM},
	}, {
		name:     "generated yaml (compiler option)",
		files:    map[string]string{"Pulumi.yaml": "name: web\nruntime:\n  name: yaml\n  options: {compiler: cue export}\n"},
		ignore:   map[string][]string{ignCM: {"data.a"}},
		excluded: []string{ignCM},
	}, {
		name: "runtime object, program in main/Main.yaml",
		files: map[string]string{
			"Pulumi.yaml":      "name: web\nruntime: {name: yaml}\nmain: prog/\n",
			"prog/Main.yaml":   "resources:\n  cm:\n    type: kubernetes:core/v1:ConfigMap\n",
			"prog/Pulumi.yaml": "resources: {}\n",
		},
		program: "prog/Main.yaml",
		ignore:  map[string][]string{ignCM: {"data.a"}},
		want:    map[string][]string{"cm": {"data.a"}},
	}, {
		name: "Main.yaml beside a Pulumi.yaml without resources",
		files: map[string]string{
			"Pulumi.yaml": "name: web\nruntime: yaml\n",
			"Main.yaml":   "resources:\n  cm:\n    type: kubernetes:core/v1:ConfigMap\n    options: {}\n",
		},
		program: "Main.yaml",
		ignore:  map[string][]string{ignCM: {"data.a"}},
		want:    map[string][]string{"cm": {"data.a"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			for name, content := range tc.files {
				g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)).To(Succeed())
				g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)).To(Succeed())
			}
			excluded, err := applyIgnoreChanges(dir, tc.ignore)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(excluded).To(Equal(tc.excluded))
			if tc.program == "" {
				g.Expect(os.ReadFile(filepath.Join(dir, "Pulumi.yaml"))).To(BeEquivalentTo(tc.files["Pulumi.yaml"]))
				return
			}
			g.Expect(ignoreChangesOf(t, filepath.Join(dir, tc.program))).To(Equal(tc.want))
		})
	}
}

func TestApplyIgnoreChangesKeepsTheRestOfTheFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(ignProgram), 0o640)).To(Succeed())
	_, err := applyIgnoreChanges(dir, map[string][]string{ignCM: {"data.a"}})
	g.Expect(err).NotTo(HaveOccurred())
	out, err := os.ReadFile(filepath.Join(dir, "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal(`name: web
runtime: yaml
# a comment the rewrite keeps
resources:
  cm:
    type: kubernetes:core/v1:ConfigMap
    properties:
      data:
        a: one # and this one
    options:
      ignoreChanges:
        - data.a
  named:
    type: kubernetes:core/v1:ConfigMap
    name: app-config
    properties:
      data: {a: one}
    options:
      protect: false
      ignoreChanges: ["data.z", "data.a"]
`))
	info, err := os.Stat(filepath.Join(dir, "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o640)))

	// Nothing to add: the file is not rewritten.
	before, _ := os.Stat(filepath.Join(dir, "Pulumi.yaml"))
	_, err = applyIgnoreChanges(dir, map[string][]string{ignCM: {"data.a"}, ignNamed: {"data.z"}})
	g.Expect(err).NotTo(HaveOccurred())
	after, _ := os.Stat(filepath.Join(dir, "Pulumi.yaml"))
	g.Expect(os.SameFile(before, after)).To(BeTrue())
}

// The work dir's files may be hard links into the shared artifact cache: the
// cache's copy must keep the program as fetched.
func TestApplyIgnoreChangesDoesNotWriteThroughHardLinks(t *testing.T) {
	g := NewWithT(t)
	cache, dir := t.TempDir(), t.TempDir()
	cached := filepath.Join(cache, "Pulumi.yaml")
	g.Expect(os.WriteFile(cached, []byte(ignProgram), 0o644)).To(Succeed())
	g.Expect(os.Link(cached, filepath.Join(dir, "Pulumi.yaml"))).To(Succeed())

	excluded, err := applyIgnoreChanges(dir, map[string][]string{ignCM: {"data.a"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(excluded).To(BeEmpty())
	g.Expect(ignoreChangesOf(t, filepath.Join(dir, "Pulumi.yaml"))).To(HaveKeyWithValue("cm", []string{"data.a"}))
	g.Expect(os.ReadFile(cached)).To(BeEquivalentTo(ignProgram))
}

func TestIgnoreChangesArgs(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: web\nruntime: go\n"), 0o644)).To(Succeed())
	spec := Spec{Type: OpUp, WorkDir: dir, StackName: "dev", IgnoreChanges: map[string][]string{ignCM: {"data.a"}, ignSecret: {"data"}}}
	for _, typ := range []OperationType{OpUp, OpPreview, OpRefresh, OpDriftCheck, OpDestroy} {
		spec.Type = typ
		o := &operation{spec: spec}
		var res Result
		g.Expect(o.ignoreChanges(&res)).To(Succeed())
		args := o.engineArgs("events.json")
		if typ == OpUp || typ == OpPreview {
			g.Expect(res.Excluded).To(Equal([]string{ignCM, ignSecret}), string(typ))
			g.Expect(args).To(ContainElements("--exclude", ignCM, ignSecret), string(typ))
		} else {
			g.Expect(res.Excluded).To(BeEmpty(), string(typ))
			g.Expect(args).NotTo(ContainElement("--exclude"), string(typ))
		}
	}
}

func TestIgnoreChangesTypeTokens(t *testing.T) {
	g := NewWithT(t)
	g.Expect(sameTypeToken("kubernetes:core/v1:ConfigMap", "kubernetes:core/v1:ConfigMap")).To(BeTrue())
	g.Expect(sameTypeToken("aws:s3:Bucket", "aws:s3/bucket:Bucket")).To(BeTrue())
	g.Expect(sameTypeToken("random:RandomPet", "random:index:RandomPet")).To(BeTrue())
	g.Expect(sameTypeToken("kubernetes:core/v1:Secret", "kubernetes:core/v1:ConfigMap")).To(BeFalse())
	g.Expect(sameTypeToken("aws:s3:Bucket", "aws:s3/bucketV2:BucketV2")).To(BeFalse())
}
