package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"gopkg.in/yaml.v3"
)

func TestProjectName(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	_, err := ProjectName(dir)
	_, isConfigErr := errors.AsType[*ConfigError](err)
	g.Expect(isConfigErr).To(BeTrue(), "no Pulumi.yaml is the user's to fix")

	g.Expect(os.WriteFile(filepath.Join(dir, "Pulumi.yml"), []byte("name: web\nruntime: yaml\n"), 0o600)).To(Succeed())
	g.Expect(ProjectName(dir)).To(Equal("web"))

	g.Expect(os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: api\nruntime: yaml\n"), 0o600)).To(Succeed())
	g.Expect(ProjectName(dir)).To(Equal("api"), "Pulumi.yaml first, as the CLI")
}

func TestPrepareConfig(t *testing.T) {
	g := NewWithT(t)
	pc, err := prepareConfig("web", []ConfigValue{
		{Key: "replicas", Value: 3},
		{Key: "aws:region", Value: "eu-west-1"},
		{Key: "ratio", Value: 0.5},
		{Key: "settings", Value: map[string]any{"on": true, "ports": []int{80, 443}}},
		{Key: "password", Value: "pw", Secret: true},
		{Key: "replicas", Value: 4}, // the last one wins
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pc.plain).To(Equal(map[string]any{
		"web:replicas": int64(4),
		"aws:region":   "eu-west-1",
		"web:ratio":    0.5,
		"web:settings": map[string]any{"on": true, "ports": []any{int64(80), int64(443)}},
	}))
	g.Expect(pc.secrets).To(Equal(map[string]any{"web:password": "pw"}))

	for _, bad := range []ConfigValue{
		{Key: "", Value: "x"},
		{Key: "ns:", Value: "x"},
		{Key: "nothing", Value: nil},
		{Key: "reserved", Value: map[string]any{"secure": "v1:abc"}},
		{Key: "fn", Value: func() {}},
	} {
		_, err := prepareConfig("web", []ConfigValue{bad})
		_, ok := errors.AsType[*ConfigError](err)
		g.Expect(ok).To(BeTrue(), "key %q", bad.Key)
	}
}

func TestMergeConfigKeepsSettingsAndReplacesSpecKeys(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path := stackFileName(dir, "org/web/dev")
	g.Expect(path).To(Equal(filepath.Join(dir, "Pulumi.dev.yaml")))
	committed := "encryptionsalt: v1:salt\nconfig:\n  web:committed: keep\n  web:replicas: 1\n  web:password: plain-in-git\n"
	g.Expect(os.WriteFile(path, []byte(committed), 0o600)).To(Succeed())

	pc, err := prepareConfig("web", []ConfigValue{
		{Key: "replicas", Value: 5},
		{Key: "settings", Value: map[string]any{"name": "n", "tags": []string{"a"}}},
		{Key: "password", Value: "pw", Secret: true},
	})
	g.Expect(err).NotTo(HaveOccurred())
	doc0, err := readStackDoc(path)
	g.Expect(err).NotTo(HaveOccurred())
	mergeConfig(doc0, pc)
	g.Expect(writeStackDoc(path, doc0)).To(Succeed())

	var doc map[string]any
	data, _ := os.ReadFile(path)
	g.Expect(yaml.Unmarshal(data, &doc)).To(Succeed())
	g.Expect(doc["encryptionsalt"]).To(Equal("v1:salt"))
	g.Expect(doc["config"]).To(Equal(map[string]any{
		"web:committed": "keep",
		"web:replicas":  5, // a number, not "5"
		"web:settings":  map[string]any{"name": "n", "tags": []any{"a"}},
	}), "the secret key is left for the CLI to set")

	info, _ := os.Stat(path)
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
}

func TestStackFileNameKeepsYml(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "Pulumi.dev.yml"), nil, 0o600)).To(Succeed())
	g.Expect(stackFileName(dir, "dev")).To(Equal(filepath.Join(dir, "Pulumi.dev.yml")))
}

func TestPlanSecretsAndPlaceLeaves(t *testing.T) {
	g := NewWithT(t)
	plan := planSecrets(map[string]any{
		"web:token": "t0k",
		"web:pin":   int64(1234),
		"web:db":    map[string]any{"user": "u", "port": int64(5432), "opts": []any{true, nil}, "empty": map[string]any{}},
	})
	g.Expect(plan.set).To(HaveKeyWithValue("web:token", "t0k"))
	g.Expect(plan.set["web:pin"]).To(Equal("1234"))
	g.Expect(plan.set).NotTo(HaveKey("web:db"), "structured values are encrypted leaf by leaf")
	g.Expect(plan.set).To(HaveLen(2 + 3)) // token, pin + leaves user, port, true

	// What the CLI leaves in the stack file after set-all.
	dir := t.TempDir()
	path := filepath.Join(dir, "Pulumi.dev.yaml")
	cfg := map[string]any{"web:token": map[string]any{"secure": "ct-token"}, "web:plain": "p"}
	for k := range plan.set {
		if k != "web:token" && k != "web:pin" {
			cfg[k] = map[string]any{"secure": "ct-" + plan.set[k]}
		}
	}
	g.Expect(writeStackDoc(path, map[string]any{"encryptionsalt": "s", "config": cfg})).To(Succeed())
	g.Expect(placeSecretLeaves(path, plan)).To(Succeed())

	doc, err := readStackDoc(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doc["encryptionsalt"]).To(Equal("s"))
	g.Expect(stackConfig(doc)).To(Equal(map[string]any{
		"web:token": map[string]any{"secure": "ct-token"},
		"web:plain": "p",
		"web:db": map[string]any{
			"user":  map[string]any{"secure": "ct-u"},
			"port":  map[string]any{"secure": "ct-5432"},
			"opts":  []any{map[string]any{"secure": "ct-true"}, nil},
			"empty": map[string]any{},
		},
	}), "no temporary key is left")
}

func TestSecretStrings(t *testing.T) {
	g := NewWithT(t)
	got := secretStrings([]ConfigValue{
		{Key: "plain", Value: "visible"},
		{Key: "a", Value: "abc", Secret: true},
		{Key: "b", Value: map[string]any{"pw": "hunter2", "port": 5432, "on": true}, Secret: true},
		{Key: "pem", Value: "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----", Secret: true},
	})
	g.Expect(got).To(ContainElements("abc", "hunter2", "5432", `{"on":true,"port":5432,"pw":"hunter2"}`,
		"MIIBOgIBAAJBAKj34GkxFhD9"))
	g.Expect(got).NotTo(ContainElements("visible", "true"))
}

// TestApplyConfigWritesTheStateSalt: on a file:// backend the stack file gets
// the passphrase salt the state records, secrets or not, so that the CLI need
// not build its secrets manager from the state.
func TestApplyConfigWritesTheStateSalt(t *testing.T) {
	g := NewWithT(t)
	backend := t.TempDir()
	stackDir := filepath.Join(backend, ".pulumi", "stacks", "web")
	g.Expect(os.MkdirAll(stackDir, 0o700)).To(Succeed())
	const salt = "v1:c2FsdHNhbHQ=:v1:bm9uY2U=:Y2lwaGVy"
	cp := `{"version":3,"checkpoint":{"latest":{"secrets_providers":{"type":"passphrase","state":{"salt":"` + salt + `"}},"resources":[]}}}`
	g.Expect(os.WriteFile(filepath.Join(stackDir, "dev.json"), []byte(cp), 0o600)).To(Succeed())

	work := t.TempDir()
	fs := openFileStack(backend, "web", "dev")
	o := &operation{spec: Spec{WorkDir: work, StackName: "dev"}, file: &fs}
	pc, err := prepareConfig("web", []ConfigValue{{Key: "replicas", Value: 2}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.applyConfig(context.Background(), pc)).To(Succeed())
	doc, err := readStackDoc(filepath.Join(work, "Pulumi.dev.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doc["encryptionsalt"]).To(Equal(salt))
	g.Expect(doc["config"]).To(Equal(map[string]any{"web:replicas": 2}))

	// Another secrets provider: no salt.
	o.spec.SecretsProvider = "awskms://alias/x"
	work2 := t.TempDir()
	o.spec.WorkDir = work2
	g.Expect(o.applyConfig(context.Background(), pc)).To(Succeed())
	doc, err = readStackDoc(filepath.Join(work2, "Pulumi.dev.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doc).NotTo(HaveKey("encryptionsalt"))
}
