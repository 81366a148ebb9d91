package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

var digestLine = regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`)

// isolate keeps the tests off the user's Docker config and key password.
func isolate(t *testing.T) {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("COSIGN_PASSWORD", "")
	os.Unsetenv("COSIGN_PASSWORD")
}

// writeProgram writes a small Pulumi program folder and returns it.
func writeProgram(t *testing.T, dir string) string {
	t.Helper()
	files := map[string]string{
		"Pulumi.yaml":          "name: infra\nruntime: yaml\nresources: {}\n",
		"lib/values.yaml":      "replicas: 2\n",
		"scripts/hook.sh":      "#!/bin/sh\necho hi\n",
		".sourceignore":        "*.tmp\n",
		"scratch.tmp":          "left out\n",
		"docs/README.md":       "# infra\n",
		"lib/nested/deep.yaml": "a: b\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustRun(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("stackpilot %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
}

func TestArtifactPushPull(t *testing.T) {
	isolate(t)
	reg := testenv.NewRegistry(t)
	src := writeProgram(t, t.TempDir())
	ref := "oci://" + reg.Host() + "/org/infra:v1"

	out, errOut := mustRun(t, "artifact", "push", ref, "--path", src, "--insecure")
	if !digestLine.MatchString(out) {
		t.Fatalf("push printed %q on stdout, want the digest alone", out)
	}
	dgst := strings.TrimSpace(out)
	if !strings.Contains(errOut, "Pushed "+src+" to "+ref+"@"+dgst) {
		t.Errorf("push said %q on stderr", errOut)
	}

	dst := filepath.Join(t.TempDir(), "out")
	out, _ = mustRun(t, "artifact", "pull", ref, "--output", dst, "--insecure")
	if strings.TrimSpace(out) != dgst {
		t.Errorf("pull printed %q, want %s", out, dgst)
	}
	for _, f := range []string{"Pulumi.yaml", "lib/values.yaml", "lib/nested/deep.yaml", "scripts/hook.sh", "docs/README.md"} {
		want, _ := os.ReadFile(filepath.Join(src, f))
		got, err := os.ReadFile(filepath.Join(dst, f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the round trip: %q, %v; want %q", f, got, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "scripts/hook.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("hook.sh lost its exec bit: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "scratch.tmp")); !os.IsNotExist(err) {
		t.Errorf("scratch.tmp is in the artifact although .sourceignore leaves it out (%v)", err)
	}

	// By digest, and a too-small --max-size is refused with the bound.
	dst2 := filepath.Join(t.TempDir(), "out")
	mustRun(t, "artifact", "pull", "oci://"+reg.Host()+"/org/infra@"+dgst, "--output", dst2, "--insecure")
	code, _, errOut := runCLI(t, "artifact", "pull", ref, "--output", filepath.Join(t.TempDir(), "x"), "--insecure", "--max-size", "10")
	if code != 1 || !strings.Contains(errOut, "over the limit of 10 bytes") {
		t.Errorf("pull --max-size 10: exit %d, %q", code, errOut)
	}
}

// testVersion is stamped into the test binary, as a release build does.
const testVersion = "v0.0.0-test"

// cliBinary builds the real stackpilot binary once per test run.
var cliBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "stackpilot-cli-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "stackpilot")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion, "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := cliBinary(); err == nil && strings.Contains(bin, "stackpilot-cli-test-") {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// runBinary runs the built binary with env added to the test's environment.
func runBinary(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	bin, err := cliBinary()
	if err != nil {
		t.Fatalf("building stackpilot: %v", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errOut.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

// TestArtifactPushReproducible pushes the same folder from two copies with
// different mtimes, with the real binary under two time zones: one digest.
func TestArtifactPushReproducible(t *testing.T) {
	isolate(t)
	reg := testenv.NewRegistry(t)
	a := writeProgram(t, t.TempDir())
	b := writeProgram(t, t.TempDir())
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	err := filepath.Walk(b, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
	var digests []string
	for i, run := range []struct {
		dir, tz string
	}{{a, "UTC"}, {b, "Asia/Tokyo"}, {b, "America/St_Johns"}} {
		if i > 0 {
			// The created annotation has seconds: a time-dependent push
			// would show.
			time.Sleep(1100 * time.Millisecond)
		}
		ref := "oci://" + reg.Host() + "/org/repro:v" + string(rune('1'+i))
		code, out, errOut := runBinary(t, []string{"TZ=" + run.tz}, "artifact", "push", ref, "--path", run.dir, "--insecure")
		if code != 0 || !digestLine.MatchString(out) {
			t.Fatalf("TZ=%s stackpilot artifact push: exit %d, stdout %q, stderr %q", run.tz, code, out, errOut)
		}
		digests = append(digests, strings.TrimSpace(out))
	}
	if digests[0] != digests[1] || digests[1] != digests[2] {
		t.Errorf("the same folder gave different digests: %v", digests)
	}
	// In process too, and --created now is not reproducible (by design).
	out, _ := mustRun(t, "artifact", "push", "oci://"+reg.Host()+"/org/repro:v4", "--path", a, "--insecure")
	if strings.TrimSpace(out) != digests[0] {
		t.Errorf("in-process push gave %s, the binary %s", out, digests[0])
	}
	out, _ = mustRun(t, "artifact", "push", "oci://"+reg.Host()+"/org/repro:v5", "--path", a, "--insecure", "--created", "now")
	if strings.TrimSpace(out) == digests[0] {
		t.Errorf("--created now gave the reproducible digest")
	}
}

func TestArtifactListTagDiff(t *testing.T) {
	isolate(t)
	reg := testenv.NewRegistry(t)
	src := writeProgram(t, t.TempDir())
	repo := "oci://" + reg.Host() + "/org/infra"
	out, _ := mustRun(t, "artifact", "push", repo+":v1", "--path", src, "--insecure", "--source", "https://example.com/infra.git", "--revision", "main@sha1:1111111111111111111111111111111111111111")
	d1 := strings.TrimSpace(out)
	out, _ = mustRun(t, "artifact", "tag", repo+":v1", "production", "--insecure")
	if strings.TrimSpace(out) != d1 {
		t.Errorf("tag printed %q, want %s", out, d1)
	}
	if err := os.WriteFile(filepath.Join(src, "Pulumi.yaml"), []byte("name: infra\nruntime: yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = mustRun(t, "artifact", "push", repo+":v2", "--path", src, "--insecure", "--revision", "main@sha1:2222222222222222222222222222222222222222", "--created", "2026-12-01T10:00:00+09:00")
	d2 := strings.TrimSpace(out)

	table, _ := mustRun(t, "artifact", "list", repo, "--insecure")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^TAG +DIGEST +REVISION +CREATED$`),
		regexp.MustCompile(`^production +` + d1 + ` +main@sha1:1{40} +1970-01-01T00:00:00Z$`),
		regexp.MustCompile(`^v1 +` + d1 + ` +main@sha1:1{40} +1970-01-01T00:00:00Z$`),
		regexp.MustCompile(`^v2 +` + d2 + ` +main@sha1:2{40} +2026-12-01T01:00:00Z$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("list table:\n%s", table)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("list table line %d: %q, want %s", i, lines[i], re)
		}
	}
	js, _ := mustRun(t, "artifact", "list", repo, "--insecure", "-o", "json")
	var rows []listedTag
	if err := json.Unmarshal([]byte(js), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("list -o json: %v\n%s", err, js)
	}
	if rows[0] != (listedTag{Tag: "production", Digest: d1, Revision: "main@sha1:" + strings.Repeat("1", 40), Source: "https://example.com/infra.git", Created: "1970-01-01T00:00:00Z"}) {
		t.Errorf("list -o json row 0: %+v", rows[0])
	}
	yml, _ := mustRun(t, "artifact", "list", repo, "--insecure", "-o", "yaml")
	if !strings.Contains(yml, "- created: \"1970-01-01T00:00:00Z\"\n  digest: "+d1+"\n") || !strings.Contains(yml, "tag: v2\n") {
		t.Errorf("list -o yaml:\n%s", yml)
	}

	// diff: the folder is v2 now; against v1 one file is modified.
	_, errOut := mustRun(t, "artifact", "diff", repo+":v2", "--path", src, "--insecure")
	if !strings.Contains(errOut, "have the same files") {
		t.Errorf("diff of the same files said %q", errOut)
	}
	code, out, errOut := runCLI(t, "artifact", "diff", repo+":v1", "--path", src, "--insecure")
	if code != 1 || out != "modified  Pulumi.yaml\n" || !strings.Contains(errOut, "differ in 1 file(s)") {
		t.Errorf("diff against v1: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if err := os.Remove(filepath.Join(src, "docs/README.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "new.yaml"), []byte("x: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "artifact", "diff", repo+":v2", "--path", src, "--insecure")
	if code != 1 || out != "removed   docs/README.md\nadded     new.yaml\n" {
		t.Errorf("diff after removing and adding: exit %d, stdout %q", code, out)
	}
	code, out, _ = runCLI(t, "artifact", "diff", repo+":v2", "--path", src, "--insecure", "--ignore-paths", "new.yaml,docs/")
	if code != 0 || out != "" {
		t.Errorf("diff --ignore-paths: exit %d, stdout %q", code, out)
	}
}
