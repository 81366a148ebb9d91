package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestMainWritesAResultForABadSpec(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	specPath, resultPath := filepath.Join(dir, "spec.json"), filepath.Join(dir, "result.json")

	g.Expect(os.WriteFile(specPath, []byte(`{"apiVersion":"runner.stackpilot.dev/v0","id":"op-7","type":"up",
		"env":{"TOKEN":"very-secret-token"}}`), 0o600)).To(Succeed())
	g.Expect(Main([]string{"--spec", specPath, "--result", resultPath})).To(Equal(0))
	res, err := ReadResult(resultPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ID).To(Equal("op-7"))
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorInternal))
	g.Expect(res.Message).To(ContainSubstring("apiVersion"))

	g.Expect(os.WriteFile(specPath, []byte(`not json`), 0o600)).To(Succeed())
	g.Expect(Main([]string{"--spec", specPath, "--result", resultPath})).To(Equal(0))
	res, err = ReadResult(resultPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ErrorClass).To(Equal(ErrorInternal))
}

func TestMainFailsWithoutAPlaceForTheResult(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(Main([]string{"--spec", filepath.Join(dir, "spec.json")})).NotTo(Equal(0))
	g.Expect(Main([]string{"--spec", filepath.Join(dir, "spec.json"), "--result",
		filepath.Join(dir, "missing", "result.json")})).NotTo(Equal(0))
	g.Expect(Main([]string{"--bogus"})).NotTo(Equal(0))
}

func TestSpecAndResultFiles(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	spec := Spec{ID: "op", Type: OpDriftCheck, Timeout: Duration(90 * time.Second),
		Config: []ConfigValue{{Key: "k", Value: map[string]any{"a": 1.5}, Secret: true}}}
	path := filepath.Join(dir, "spec.json")
	g.Expect(WriteSpec(path, spec)).To(Succeed())
	info, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)), "specs carry secrets")
	raw, _ := os.ReadFile(path)
	g.Expect(string(raw)).To(ContainSubstring(`"timeout": "1m30s"`))
	back, err := ReadSpec(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Timeout).To(Equal(spec.Timeout))
	g.Expect(back.APIVersion).To(Equal(APIVersion))

	_, err = ReadResult(filepath.Join(dir, "none.json"))
	g.Expect(err).To(MatchError(ErrNoResult))
	res := Result{APIVersion: APIVersion, ID: "op", Outputs: map[string]Output{"o": {Value: "v", Secret: true}}}
	g.Expect(WriteResult(filepath.Join(dir, "r.json"), res)).To(Succeed())
	entries, _ := os.ReadDir(dir)
	g.Expect(entries).To(HaveLen(2), "no temporary file is left behind")
	back2, err := ReadResult(filepath.Join(dir, "r.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back2.Outputs).To(Equal(res.Outputs))

	var wrong Result
	wrong.APIVersion = "other"
	data, _ := json.Marshal(wrong)
	g.Expect(os.WriteFile(filepath.Join(dir, "w.json"), data, 0o600)).To(Succeed())
	_, err = ReadResult(filepath.Join(dir, "w.json"))
	g.Expect(err).To(HaveOccurred())
}

func TestFileBackendDir(t *testing.T) {
	g := NewWithT(t)
	dir, ok := fileBackendDir("file:///var/state?no_tmp_dir=true")
	g.Expect(ok).To(BeTrue())
	g.Expect(dir).To(Equal("/var/state"))
	home, _ := os.UserHomeDir()
	dir, _ = fileBackendDir("file://~/st")
	g.Expect(dir).To(Equal(filepath.Join(home, "st")))
	_, ok = fileBackendDir("s3://bucket")
	g.Expect(ok).To(BeFalse())
}

func TestFileLocks(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	for _, p := range []string{
		".pulumi/locks/organization/web/dev/a.json",
		".pulumi/locks/organization/web/dev/b.json",
		".pulumi/locks/organization/api/dev/c.json", // another project
		".pulumi/locks/organization/web/prod/d.json",
		".pulumi/locks/dev/legacy.json",
	} {
		g.Expect(os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o700)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(root, p), nil, 0o600)).To(Succeed())
	}
	g.Expect(fileLocks(root, "web", "dev")).To(HaveLen(3))
	g.Expect(fileLocks(root, "web", "organization/web/prod")).To(HaveLen(1))
}
