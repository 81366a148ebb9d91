package runner

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeTools puts scripts named node, python3 and go first on PATH that
// print version, so that the key's toolchain part is the test's.
func fakeTools(t *testing.T, version string) {
	t.Helper()
	bin := t.TempDir()
	for _, name := range []string{"node", "python3", "go"} {
		script := "#!/bin/sh\necho " + version + "\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestPlanDeps(t *testing.T) {
	fakeTools(t, "v20.0.0")
	for _, tc := range []struct {
		name  string
		files map[string]string
		// want: "" for no install, else "<manager> <lockfile> <path>"
		want string
	}{
		{"yaml", map[string]string{"Pulumi.yaml": "name: p\nruntime: yaml\n"}, ""},
		{"no project file", map[string]string{"package-lock.json": "{}"}, ""},
		{"a project file that is not YAML", map[string]string{"Pulumi.yaml": "runtime: [nodejs\n", "package-lock.json": "{}"}, ""},
		{"Pulumi.yml", map[string]string{"Pulumi.yml": "name: p\nruntime: nodejs\n", "package-lock.json": "{}"}, "npm package-lock.json node_modules"},
		{"nodejs without a lockfile", map[string]string{"Pulumi.yaml": "name: p\nruntime: nodejs\n", "package.json": "{}"}, ""},
		{"npm", map[string]string{"Pulumi.yaml": "name: p\nruntime: nodejs\n", "package-lock.json": "{}"}, "npm package-lock.json node_modules"},
		{"yarn guessed", map[string]string{"Pulumi.yaml": "name: p\nruntime: nodejs\n", "yarn.lock": "x", "package-lock.json": "{}"}, "yarn yarn.lock node_modules"},
		{"npm chosen", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: nodejs\n  options:\n    packagemanager: npm\n", "yarn.lock": "x", "package-lock.json": "{}"}, "npm package-lock.json node_modules"},
		{"pnpm without its lockfile", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: nodejs\n  options: {packagemanager: pnpm}\n", "package-lock.json": "{}"}, ""},
		{"node_modules in the tree", map[string]string{"Pulumi.yaml": "name: p\nruntime: nodejs\n", "package-lock.json": "{}", "node_modules/x/index.js": ""}, ""},
		{"bun", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: nodejs\n  options: {packagemanager: bun}\n", "bun.lockb": "x"}, ""},
		{"python without a virtualenv", map[string]string{"Pulumi.yaml": "name: p\nruntime: python\n", "requirements.txt": "x"}, "pip requirements.txt venv"},
		{"python without requirements", map[string]string{"Pulumi.yaml": "name: p\nruntime: python\n", "__main__.py": "x"}, ""},
		{"pip", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: python\n  options: {virtualenv: venv}\n", "requirements.txt": "x"}, "pip requirements.txt venv"},
		{"pip, a virtualenv out of the folder", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: python\n  options: {virtualenv: ../venv}\n", "requirements.txt": "x"}, ""},
		{"pip, an absolute virtualenv", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: python\n  options: {virtualenv: /venv}\n", "requirements.txt": "x"}, ""},
		{"pip, the virtualenv in the tree", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: python\n  options: {virtualenv: venv}\n", "requirements.txt": "x", "venv/bin/python": ""}, ""},
		{"poetry", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: python\n  options: {toolchain: poetry}\n", "poetry.lock": "x"}, "poetry poetry.lock .venv"},
		{"uv", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: python\n  options: {toolchain: uv}\n", "uv.lock": "x"}, "uv uv.lock .venv"},
		{"uv with a virtualenv", map[string]string{"Pulumi.yaml": "name: p\nruntime:\n  name: python\n  options: {toolchain: uv, virtualenv: env}\n", "uv.lock": "x"}, "uv uv.lock env"},
		{"go, standard library only", map[string]string{"Pulumi.yaml": "name: p\nruntime: go\n", "go.mod": "module p\n"}, ""},
		{"go, empty go.sum", map[string]string{"Pulumi.yaml": "name: p\nruntime: go\n", "go.mod": "module p\n", "go.sum": ""}, ""},
		{"go", map[string]string{"Pulumi.yaml": "name: p\nruntime: go\n", "go.mod": "module p\n", "go.sum": "x v1.0.0 h1:abc\n"}, "go go.sum gomodcache"},
		{"go, vendored", map[string]string{"Pulumi.yaml": "name: p\nruntime: go\n", "go.mod": "module p\n", "go.sum": "x\n", "vendor/modules.txt": ""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			d, err := PlanDeps(context.Background(), dir, filepath.Join(t.TempDir(), "deps"), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if d != nil {
				got = d.Manager + " " + d.Lockfile + " " + strings.Join(d.Paths, ",")
				if !hexKey.MatchString(d.Key) {
					t.Errorf("key %q is not a hex SHA-256", d.Key)
				}
			}
			if got != tc.want {
				t.Errorf("PlanDeps = %q, want %q", got, tc.want)
			}
		})
	}
}

// The key changes with the lockfile's bytes, the toolchain's version and
// the package manager, and with nothing else of the program.
func TestDepsKey(t *testing.T) {
	files := map[string]string{"Pulumi.yaml": "name: p\nruntime: nodejs\n", "package-lock.json": `{"v":1}`, "index.js": "1"}
	key := func(version string, change map[string]string) string {
		t.Helper()
		fakeTools(t, version)
		f := map[string]string{}
		for k, v := range files {
			f[k] = v
		}
		for k, v := range change {
			f[k] = v
		}
		d, err := PlanDeps(context.Background(), writeFiles(t, f), t.TempDir(), nil)
		if err != nil || d == nil {
			t.Fatalf("PlanDeps: %v, %v", d, err)
		}
		return d.Key
	}
	base := key("v20.0.0", nil)
	if k := key("v20.0.0", map[string]string{"index.js": "2", "Pulumi.yaml": "name: q\nruntime: nodejs\n"}); k != base {
		t.Error("the key changed with the program's code")
	}
	for name, k := range map[string]string{
		"the lockfile":        key("v20.0.0", map[string]string{"package-lock.json": `{"v":2}`}),
		"the Node.js version": key("v22.0.0", nil),
		"the package manager": key("v20.0.0", map[string]string{"yarn.lock": `{"v":1}`, "package-lock.json": ""}),
	} {
		if k == base {
			t.Errorf("the key did not change with %s", name)
		}
	}
}

// A failed install is a DepsError naming the command, with its last lines
// and not the first ones.
func TestDepsInstallFailure(t *testing.T) {
	fakeTools(t, "v20.0.0")
	bin := t.TempDir()
	script := "#!/bin/sh\nfor i in $(seq 1 100); do echo line $i; done\necho 'npm ERR! the last words' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := writeFiles(t, map[string]string{"Pulumi.yaml": "name: p\nruntime: nodejs\n", "package-lock.json": "{}"})
	d, err := PlanDeps(context.Background(), dir, t.TempDir(), nil)
	if err != nil || d == nil {
		t.Fatalf("PlanDeps: %v, %v", d, err)
	}
	err = d.Install(context.Background(), nil)
	de, ok := err.(*DepsError)
	if !ok {
		t.Fatalf("Install: %v, want a *DepsError", err)
	}
	msg := de.Error()
	if !strings.Contains(msg, "npm ci") || !strings.Contains(msg, "exit status 3") || !strings.Contains(msg, "npm ERR! the last words") || !strings.Contains(msg, "line 100") {
		t.Errorf("message lacks the command or its last lines:\n%s", msg)
	}
	if strings.Contains(msg, "line 1\n") || strings.Count(msg, "\n") > depsLines+1 {
		t.Errorf("message holds more than the last lines:\n%s", msg)
	}
}
