package opchannel

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// These tests run RunPod in-process against a real TLS Server with a
// dependency cache, with the real node and npm of this machine and the
// pinned pulumi CLI. No registry is reached: the program's one dependency
// is a tarball made here with `npm pack` and named by a file: reference,
// and npm is told to stay offline with a registry on a closed loopback
// port.
//
// The Node.js language host is not installed here, so the `pulumi` step of
// every operation fails after the dependencies are in place; the tests
// assert on the cache and on Result.DependencyCache, not on the outcome.

// npmOffline skips without node and npm, and keeps npm off the network and
// out of the user's home.
func npmOffline(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Node.js dependency cache cannot be tried here", tool)
		}
	}
	t.Setenv("npm_config_cache", filepath.Join(t.TempDir(), "npm-cache"))
	t.Setenv("npm_config_offline", "true")
	t.Setenv("npm_config_registry", "http://127.0.0.1:9/")
	t.Setenv("npm_config_update_notifier", "false")
}

func runIn(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// nodeProgram makes a tree holding a Node.js program at prog/ whose
// package.json and package-lock.json depend only on a local tarball,
// prog/tiny-dep-1.0.0.tgz.
func nodeProgram(t *testing.T) (string, string) {
	t.Helper()
	pkg := t.TempDir()
	files := map[string]string{
		"package.json": `{"name": "tiny-dep", "version": "1.0.0", "main": "index.js"}`,
		"index.js":     `module.exports = "tiny";`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runIn(t, pkg, "npm", "pack", "--silent")
	tgz, err := os.ReadFile(filepath.Join(pkg, "tiny-dep-1.0.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	// The lockfile, made once beside the tarball, offline.
	lockDir := t.TempDir()
	pkgJSON := `{"name": "cached", "version": "0.0.1", "main": "index.js", "dependencies": {"tiny-dep": "file:tiny-dep-1.0.0.tgz"}}`
	if err := os.WriteFile(filepath.Join(lockDir, "package.json"), []byte(pkgJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lockDir, "tiny-dep-1.0.0.tgz"), tgz, 0o644); err != nil {
		t.Fatal(err)
	}
	runIn(t, lockDir, "npm", "install", "--package-lock-only", "--no-audit", "--no-fund")
	lock, err := os.ReadFile(filepath.Join(lockDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	tree, digest := makeTree(t, map[string]string{
		"prog/Pulumi.yaml":        "name: cached\nruntime:\n  name: nodejs\n  options:\n    packagemanager: npm\n",
		"prog/package.json":       pkgJSON,
		"prog/package-lock.json":  string(lock),
		"prog/index.js":           `require("tiny-dep");`,
		"prog/tiny-dep-1.0.0.tgz": string(tgz),
	})
	return tree, digest
}

// failingNpm puts an npm first on PATH that leaves a mark and fails: an
// operation that runs npm fails and says so.
func failingNpm(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	mark := filepath.Join(t.TempDir(), "npm-ran")
	script := "#!/bin/sh\necho \"$@\" >> " + mark + "\necho 'npm ERR! this npm must not run' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return mark
}

func restoredDep(t *testing.T, o PodOptions) string {
	t.Helper()
	return fileText(t, filepath.Join(o.WorkRoot, treeDir, "prog", "node_modules", "tiny-dep", "index.js"))
}

// The first operation of a lockfile installs and fills the cache; the next
// one, in a fresh work root, restores it and runs no npm.
func TestRunPodDependencyCacheNode(t *testing.T) {
	env := pulumiOnPath(t)
	npmOffline(t)
	c, cacheDir := depsChannel(t, 0)
	tree, digest := nodeProgram(t)
	spec := runner.Spec{Type: runner.OpUp, WorkDir: "prog", StackName: "dev",
		Backend: "file://" + filepath.Join(t.TempDir(), "state"), Env: env, Timeout: runner.Duration(5 * time.Minute)}

	o, res := runPod(t, c, newOp(t, "op-miss", tree, digest, spec))
	if res.DependencyCache != runner.DepCacheMiss {
		t.Fatalf("first operation: dependencyCache %q, want miss: %s", res.DependencyCache, res.Message)
	}
	if strings.Contains(res.Message, "installing the program's dependencies") {
		t.Fatalf("the install failed: %s", res.Message)
	}
	if got := restoredDep(t, o); got != `module.exports = "tiny";` {
		t.Fatalf("npm ci did not install the dependency: %q", got)
	}
	entries, _ := filepath.Glob(filepath.Join(cacheDir, "team", "*.tar.gz"))
	if len(entries) != 1 {
		t.Fatalf("the cache of namespace team holds %v, want one entry", entries)
	}

	mark := failingNpm(t)
	o, res = runPod(t, c, newOp(t, "op-hit", tree, digest, spec))
	if res.DependencyCache != runner.DepCacheHit {
		t.Fatalf("second operation: dependencyCache %q, want hit: %s", res.DependencyCache, res.Message)
	}
	if ran := fileText(t, mark); ran != "" {
		t.Fatalf("npm ran on a hit: %q", ran)
	}
	if got := restoredDep(t, o); got != `module.exports = "tiny";` {
		t.Fatalf("the hit did not restore node_modules: %q", got)
	}
	if strings.Contains(res.Message, "installing the program's dependencies") {
		t.Fatalf("a hit failed as an install: %s", res.Message)
	}
}

// An entry that is not the install (a tar that escapes) restores nothing,
// writes nothing outside the Pod's folder, and the Pod installs instead;
// an install that fails fails the operation as a program error with npm's
// last words.
func TestRunPodDependencyCacheRefusesEscapes(t *testing.T) {
	env := pulumiOnPath(t)
	npmOffline(t)
	c, cacheDir := depsChannel(t, 0)
	tree, digest := nodeProgram(t)
	spec := runner.Spec{Type: runner.OpUp, WorkDir: "prog", StackName: "dev",
		Backend: "file://" + filepath.Join(t.TempDir(), "state"), Env: env, Timeout: runner.Duration(5 * time.Minute)}

	// The key this program's Pod asks for, computed as the Pod does.
	d, err := runner.PlanDeps(context.Background(), filepath.Join(tree, "prog"), t.TempDir(), nil)
	if err != nil || d == nil {
		t.Fatalf("PlanDeps: %v %v", d, err)
	}
	outside := filepath.Join(t.TempDir(), "escaped")
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, h := range []*tar.Header{
		{Name: "node_modules/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "node_modules/tiny-dep", Typeflag: tar.TypeSymlink, Linkname: filepath.Dir(outside), Mode: 0o777},
		{Name: "node_modules/tiny-dep/escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte("evil"))
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	entry := filepath.Join(cacheDir, "team", d.Key+".tar.gz")
	if err := os.MkdirAll(filepath.Dir(entry), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	// Whether the untar refuses it is artifact's contract; that it does for
	// this very entry is checked here, so the test cannot pass vacuously.
	if _, ok := errUnsafe(artifact.Untar(bytes.NewReader(b.Bytes()), t.TempDir(), DepsLimits)); !ok {
		t.Fatal("the evil entry is not one artifact.Untar refuses")
	}

	o, res := runPod(t, c, newOp(t, "op-evil", tree, digest, spec))
	if _, err := os.Lstat(outside); err == nil {
		t.Fatal("the escaping entry wrote outside the Pod's folder")
	}
	if res.DependencyCache != runner.DepCacheMiss {
		t.Fatalf("an escaping entry: dependencyCache %q, want miss (installed instead): %s", res.DependencyCache, res.Message)
	}
	if got := restoredDep(t, o); got != `module.exports = "tiny";` {
		t.Fatalf("the install after the refused entry: %q", got)
	}
	// The install replaced the bad entry: the next Pod hits.
	if now, _ := os.ReadFile(entry); bytes.Equal(now, b.Bytes()) {
		t.Error("the refused entry was not replaced by the install")
	}

	// No entry and a failing npm: a program error, npm's words in it.
	if err := os.Remove(entry); err != nil {
		t.Fatal(err)
	}
	failingNpm(t)
	_, res = runPod(t, c, newOp(t, "op-fails", tree, digest, spec))
	if res.Outcome != runner.OutcomeFailed || res.ErrorClass != runner.ErrorProgram || res.DependencyCache != runner.DepCacheMiss ||
		!contains(res.Message, "installing the program's dependencies", "npm ci", "npm ERR! this npm must not run") {
		t.Fatalf("a failed install: %+v", res)
	}
}

func errUnsafe(err error) (*artifact.UnsafePathError, bool) {
	return errors.AsType[*artifact.UnsafePathError](err)
}

// A Go program of the standard library alone (no go.sum) needs no install:
// the result says "" and nothing is cached.
func TestRunPodDependencyCacheNone(t *testing.T) {
	env := pulumiOnPath(t)
	c, cacheDir := depsChannel(t, 0)
	tree, digest := makeTree(t, map[string]string{
		"prog/Pulumi.yaml": "name: gostd\nruntime: go\n",
		"prog/go.mod":      "module gostd\n\ngo 1.22\n",
		"prog/main.go":     "package main\n\nfunc main() {}\n",
	})
	spec := runner.Spec{Type: runner.OpUp, WorkDir: "prog", StackName: "dev",
		Backend: "file://" + filepath.Join(t.TempDir(), "state"), Env: env, Timeout: runner.Duration(5 * time.Minute)}
	_, res := runPod(t, c, newOp(t, "op-go", tree, digest, spec))
	if res.DependencyCache != "" {
		t.Fatalf("a Go program without go.sum: dependencyCache %q, want none", res.DependencyCache)
	}
	if entries, _ := filepath.Glob(filepath.Join(cacheDir, "*", "*")); len(entries) != 0 {
		t.Fatalf("the cache holds %v", entries)
	}
}

// A Python program, with a virtualenv option (the virtualenv in its folder)
// and without (one under the work root, whose python the language host is
// told to run): the first Pod makes it (python3 -m venv, pip install -r
// requirements.txt, offline: the requirements name nothing), the second
// restores it and makes its links to the interpreter again, which the entry
// cannot carry. The Python language host is not installed here either: the
// assertions are on the virtualenv.
func TestRunPodDependencyCachePython(t *testing.T) {
	env := pulumiOnPath(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the Python dependency cache cannot be tried here")
	}
	t.Setenv("PIP_NO_INDEX", "1") // pip reaches no index, whatever happens
	for _, tc := range []struct {
		name, options string
		venv          func(o PodOptions) string
	}{
		{"virtualenv option", "\n  options:\n    toolchain: pip\n    virtualenv: venv",
			func(o PodOptions) string { return filepath.Join(o.WorkRoot, treeDir, "prog", "venv") }},
		{"no virtualenv option", "",
			func(o PodOptions) string { return filepath.Join(o.WorkRoot, depsDir, "venv") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cacheDir := depsChannel(t, 0)
			tree, digest := makeTree(t, map[string]string{
				"prog/Pulumi.yaml":      "name: py\nruntime:\n  name: python" + tc.options + "\n",
				"prog/requirements.txt": "# nothing to download\n",
				"prog/__main__.py":      "import pulumi\n",
			})
			spec := runner.Spec{Type: runner.OpUp, WorkDir: "prog", StackName: "dev",
				Backend: "file://" + filepath.Join(t.TempDir(), "state"), Env: env, Timeout: runner.Duration(5 * time.Minute)}
			venvPython := func(o PodOptions) {
				t.Helper()
				venv := tc.venv(o)
				out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import sys; print(sys.prefix)").CombinedOutput()
				if err != nil {
					t.Fatalf("the virtualenv's python does not run: %v\n%s", err, out)
				}
				if got := strings.TrimSpace(string(out)); got != venv {
					t.Fatalf("the virtualenv's prefix is %s, want %s", got, venv)
				}
				if _, err := os.Stat(filepath.Join(venv, "lib")); err != nil {
					t.Fatalf("the virtualenv has no lib: %v", err)
				}
			}

			o, res := runPod(t, c, newOp(t, "op-py-miss", tree, digest, spec))
			if res.DependencyCache != runner.DepCacheMiss || strings.Contains(res.Message, "installing the program's dependencies") {
				t.Fatalf("first operation: dependencyCache %q: %s", res.DependencyCache, res.Message)
			}
			venvPython(o)
			if entries, _ := filepath.Glob(filepath.Join(cacheDir, "team", "*.tar.gz")); len(entries) != 1 {
				t.Fatalf("the cache of namespace team holds %v, want one entry", entries)
			}

			o, res = runPod(t, c, newOp(t, "op-py-hit", tree, digest, spec))
			if res.DependencyCache != runner.DepCacheHit {
				t.Fatalf("second operation: dependencyCache %q, want hit: %s", res.DependencyCache, res.Message)
			}
			venvPython(o)
		})
	}
}
