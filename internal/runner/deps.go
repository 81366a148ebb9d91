package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// What Result.DependencyCache says of an operation's dependency install.
const (
	// DepCacheHit: the install a cache entry held was restored; no package
	// manager ran.
	DepCacheHit = "hit"
	// DepCacheMiss: no entry held it; the package manager ran (and its
	// output was offered to the cache).
	DepCacheMiss = "miss"
)

// Deps is a program's dependency install as the runner Pod makes it: once
// per lockfile, its output cached under Key. The controller never builds
// one; only a Job operation's Pod does (internal/opchannel), because with the
// Local executor the program's folder and the tools are the controller's.
type Deps struct {
	Runtime  string // nodejs, python, go
	Manager  string // npm, yarn, pnpm, pip, poetry, uv, go
	Lockfile string // its name, in the program's folder
	// Key is the hex SHA-256 of everything that makes the install's output
	// (keyInputs): the same key restores an install that works as is.
	Key string
	// Base is the folder the install's output lives under, and Paths the
	// folders under it that the install makes (slash-separated, relative,
	// without ".."): what a cache entry holds and restores.
	Base  string
	Paths []string
	// Env is what the install and the Pulumi run need besides the Pod's
	// environment and Spec.Env to find the output (GOMODCACHE, ...). It
	// holds no secret: it goes to Spec.ToolEnv.
	Env map[string]string

	dir       string // the program's folder
	toolchain string // the runtime's own version, for the key
	install   []step // the clean install
	restored  []step // what a restored install needs (a virtualenv's interpreter links)
}

// step is one command of an install, run in the program's folder.
type step struct {
	name string
	args []string
}

// String is the command as a person would type it.
func (s step) String() string { return strings.Join(append([]string{s.name}, s.args...), " ") }

// project is what PlanDeps reads of Pulumi.yaml: the runtime's name and the
// options that choose the package manager and the virtualenv.
type project struct {
	Runtime projectRuntime `yaml:"runtime"`
}

type projectRuntime struct {
	Name    string         `yaml:"name"`
	Options runtimeOptions `yaml:"options"`
}

type runtimeOptions struct {
	PackageManager string `yaml:"packagemanager"` // nodejs
	Toolchain      string `yaml:"toolchain"`      // python
	Virtualenv     string `yaml:"virtualenv"`     // python
}

// UnmarshalYAML takes both forms: "runtime: nodejs" and
// "runtime: {name: nodejs, options: {...}}".
func (r *projectRuntime) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		r.Name = n.Value
		return nil
	}
	type plain projectRuntime // without this method
	return n.Decode((*plain)(r))
}

// DepsError is a program whose dependencies cannot be planned or installed:
// the program's (or its image's) to fix, so the operation fails as a
// program error. Its text carries the tool's last lines.
type DepsError struct {
	Reason string
}

func (e *DepsError) Error() string { return e.Reason }

// PlanDeps reads the program's runtime and lockfile in dir. It returns nil,
// and nothing is installed or cached, when the runtime has no dependencies
// to install (yaml, or one the runner does not know), when there is no
// lockfile (only a lockfile says what to install, and an install without one
// is not the same twice), and when the tree already holds the install (a
// node_modules, a virtualenv or a vendor folder committed or built into the
// artifact: pulumi-kubernetes-operator#374 asks for exactly that). cacheRoot
// is a writable folder of the Pod outside the tree, for Go's caches and the
// virtualenv of a pip program without one. env is Spec.Env, which the key's
// toolchain probe and the install see.
func PlanDeps(ctx context.Context, dir, cacheRoot string, env map[string]string) (*Deps, error) {
	var p project
	data, err := readProject(dir)
	if err != nil || data == nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &p); err != nil {
		// The run says so (ProjectName), as for any program.
		return nil, nil
	}
	var d *Deps
	switch p.Runtime.Name {
	case "nodejs":
		d, err = nodeDeps(dir, p)
	case "python":
		d, err = pythonDeps(dir, cacheRoot, p)
	case "go":
		d, err = goDeps(dir, cacheRoot)
	default: // yaml, and runtimes whose installs the runner does not know
		return nil, nil
	}
	if d == nil || err != nil {
		return nil, err
	}
	d.Runtime, d.dir = p.Runtime.Name, dir
	if d.toolchain, err = toolchainVersion(ctx, d, env); err != nil {
		return nil, err
	}
	lock, err := os.ReadFile(filepath.Join(dir, d.Lockfile))
	if err != nil {
		return nil, err
	}
	d.Key = d.key(lock, extraKeyFiles(dir, d))
	return d, nil
}

// readProject reads the project file; none is nil (the run then says so).
func readProject(dir string) ([]byte, error) {
	for _, name := range projectFileNames {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		return data, err
	}
	return nil, nil
}

// firstFile is the first of names that is a regular file in dir, or "".
func firstFile(dir string, names ...string) string {
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			return n
		}
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// nodeLockfiles maps each Node.js package manager to its lockfile, in the
// order Pulumi's Node.js host guesses the manager when the option is unset.
var nodeLockfiles = []struct{ manager, lockfile string }{
	{"yarn", "yarn.lock"},
	{"pnpm", "pnpm-lock.yaml"},
	{"npm", "package-lock.json"},
}

func nodeDeps(dir string, p project) (*Deps, error) {
	manager := p.Runtime.Options.PackageManager
	lockfile := ""
	switch manager {
	case "":
		for _, l := range nodeLockfiles {
			if firstFile(dir, l.lockfile) != "" {
				manager, lockfile = l.manager, l.lockfile
				break
			}
		}
	case "npm", "yarn", "pnpm":
		for _, l := range nodeLockfiles {
			if l.manager == manager {
				lockfile = firstFile(dir, l.lockfile)
			}
		}
	default:
		// bun, or a manager Pulumi adds later: the image's business.
		return nil, nil
	}
	if lockfile == "" || exists(filepath.Join(dir, "node_modules")) {
		return nil, nil
	}
	d := &Deps{Manager: manager, Lockfile: lockfile, Base: dir, Paths: []string{"node_modules"}}
	switch manager {
	case "npm":
		// --ignore-scripts is not passed: packages with native parts build
		// in their install scripts, and the key holds the Node.js version.
		d.install = []step{{"npm", []string{"ci", "--no-audit", "--no-fund"}}}
	case "yarn":
		d.install = []step{{"yarn", []string{"install", "--frozen-lockfile", "--non-interactive"}}}
	case "pnpm":
		// node-linker=hoisted keeps the whole install inside node_modules
		// (pnpm's default store lives in the home folder, outside it).
		d.install = []step{{"pnpm", []string{"install", "--frozen-lockfile", "--config.node-linker=hoisted"}}}
	}
	return d, nil
}

// venvPath is the virtualenv option as a folder under the program's:
// an absolute path or one that leaves the folder is the image's.
func venvPath(option string) (string, bool) {
	if option == "" || filepath.IsAbs(option) {
		return "", false
	}
	clean := filepath.ToSlash(filepath.Clean(option))
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}

func pythonDeps(dir, cacheRoot string, p project) (*Deps, error) {
	opts := p.Runtime.Options
	var d *Deps
	switch opts.Toolchain {
	case "", "pip":
		if firstFile(dir, "requirements.txt") == "" {
			return nil, nil
		}
		if opts.Virtualenv == "" {
			return ambientVenv(cacheRoot), nil
		}
		venv, ok := venvPath(opts.Virtualenv)
		if !ok {
			return nil, nil // the image's virtualenv
		}
		// Pulumi's pip toolchain installs only into a missing or empty
		// virtualenv, and uses one whose bin/python exists as it is.
		d = &Deps{Manager: "pip", Lockfile: "requirements.txt", Paths: []string{venv}}
		python := filepath.Join(dir, filepath.FromSlash(venv), "bin", "python")
		d.install = []step{
			{"python3", []string{"-m", "venv", venv}},
			{python, []string{"-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-r", "requirements.txt"}},
		}
		d.restored = []step{relinkVenv(venv)}
	case "poetry":
		if firstFile(dir, "poetry.lock") == "" {
			return nil, nil
		}
		// In the project's folder, so that it is cached and restored where
		// `poetry env info --path` (Pulumi's poetry toolchain) finds it.
		d = &Deps{Manager: "poetry", Lockfile: "poetry.lock", Paths: []string{".venv"},
			Env: map[string]string{"POETRY_VIRTUALENVS_IN_PROJECT": "true"}}
		d.install = []step{{"poetry", []string{"install", "--no-ansi", "--no-interaction"}}}
		d.restored = []step{relinkVenv(".venv")}
	case "uv":
		if firstFile(dir, "uv.lock") == "" {
			return nil, nil
		}
		venv := ".venv" // Pulumi's uv toolchain: beside uv.lock, unless the option says
		if opts.Virtualenv != "" {
			v, ok := venvPath(opts.Virtualenv)
			if !ok {
				return nil, nil
			}
			venv = v
		}
		d = &Deps{Manager: "uv", Lockfile: "uv.lock", Paths: []string{venv},
			Env: map[string]string{"UV_PROJECT_ENVIRONMENT": filepath.Join(dir, filepath.FromSlash(venv))}}
		d.install = []step{{"uv", []string{"sync", "--frozen", "--no-progress"}}}
		d.restored = []step{relinkVenv(venv)}
	default:
		return nil, nil
	}
	if exists(filepath.Join(dir, filepath.FromSlash(d.Paths[0]))) {
		return nil, nil // the tree brings its own virtualenv
	}
	d.Base = dir
	return d, nil
}

// ambientVenv is the install of a pip program without a virtualenv option.
// Pulumi's pip toolchain then runs the first python3 on PATH, installing
// nothing, and the image's python has none of the program's packages (its
// root file system is read-only besides). So the requirements go into a
// virtualenv outside the tree, under cacheRoot, whose python the language
// host runs: PULUMI_PYTHON_CMD names the python the pip toolchain uses
// without a virtualenv.
func ambientVenv(cacheRoot string) *Deps {
	venv := filepath.Join(cacheRoot, "venv")
	d := &Deps{Manager: "pip", Lockfile: "requirements.txt", Base: cacheRoot, Paths: []string{"venv"},
		Env: map[string]string{"PULUMI_PYTHON_CMD": filepath.Join(venv, "bin", "python")}}
	d.install = []step{
		{"python3", []string{"-m", "venv", venv}},
		{filepath.Join(venv, "bin", "python"), []string{"-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-r", "requirements.txt"}},
	}
	d.restored = []step{relinkVenv(venv)}
	return d
}

// relinkVenv makes a restored virtualenv's links to its interpreter again.
// They point at the interpreter by absolute path, outside the program's
// folder, so a cache entry cannot carry them (artifact.Untar refuses links
// that leave the archive's folder, rightly); the key holds the
// interpreter's version and place, so the same one is there.
func relinkVenv(venv string) step {
	return step{"python3", []string{"-m", "venv", "--upgrade", "--without-pip", venv}}
}

// LeftOut says that the symbolic link rel (slash-separated, relative to
// Base) is not for a cache entry, because Restored makes it again: a
// virtualenv's links in its bin folder to the interpreter.
func (d *Deps) LeftOut(rel string) bool {
	if d.Runtime != "python" || len(d.restored) == 0 {
		return false
	}
	dir, _ := filepath.Split(filepath.FromSlash(rel))
	return filepath.ToSlash(filepath.Clean(dir)) == d.Paths[0]+"/bin"
}

// Restored finishes an install restored from a cache entry: what the entry
// could not carry is made again. No package manager runs.
func (d *Deps) Restored(ctx context.Context, env map[string]string) error {
	for _, s := range d.restored {
		if _, err := d.run(ctx, s, env, 16<<10); err != nil {
			return err
		}
	}
	return nil
}

func goDeps(dir, cacheRoot string) (*Deps, error) {
	// A go.sum that is absent or empty: only the standard library.
	if fi, err := os.Stat(filepath.Join(dir, "go.sum")); err != nil || fi.Size() == 0 || !fi.Mode().IsRegular() {
		return nil, nil
	}
	if exists(filepath.Join(dir, "vendor")) || firstFile(dir, "go.mod") == "" {
		return nil, nil
	}
	d := &Deps{Manager: "go", Lockfile: "go.sum", Base: cacheRoot, Paths: []string{"gomodcache"},
		Env: map[string]string{
			// Pulumi's Go host builds the program with `go build`, which
			// downloads only the modules missing from GOMODCACHE: with the
			// restored one, none. GOCACHE is the Pod's to write (a
			// read-only root file system), not cached.
			"GOMODCACHE": filepath.Join(cacheRoot, "gomodcache"),
			"GOCACHE":    filepath.Join(cacheRoot, "gocache"),
		}}
	d.install = []step{{"go", []string{"mod", "download"}}}
	return d, nil
}

// extraKeyFiles are the files besides the lockfile that change what the
// install makes: go.mod says which of go.sum's modules are needed.
func extraKeyFiles(dir string, d *Deps) map[string][]byte {
	if d.Runtime != "go" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil
	}
	return map[string][]byte{"go.mod": b}
}

// key is the cache key: the runtime and its version (a node_modules with
// native parts, or a virtualenv, works only with the interpreter it was
// made with), the package manager, the lockfile's name and bytes, the
// other files that matter, and the OS and architecture of the Pod.
func (d *Deps) key(lock []byte, extra map[string][]byte) string {
	h := sha256.New()
	field := func(name string, value []byte) {
		fmt.Fprintf(h, "%s %d\n", name, len(value))
		h.Write(value)
		h.Write([]byte{'\n'})
	}
	field("format", []byte("stackpilot-deps-v1"))
	field("runtime", []byte(d.Runtime))
	field("toolchain", []byte(d.toolchain))
	field("manager", []byte(d.Manager))
	field("paths", []byte(strings.Join(d.Paths, "\x00")))
	field("platform", []byte(runtime.GOOS+"/"+runtime.GOARCH))
	field("lockfile", []byte(d.Lockfile))
	field("lock", lock)
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		field("file "+n, extra[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// toolchainVersion asks the runtime for its version, for the key.
func toolchainVersion(ctx context.Context, d *Deps, env map[string]string) (string, error) {
	var s step
	switch d.Runtime {
	case "nodejs":
		s = step{"node", []string{"--version"}}
	case "python":
		// The version and where it lives: a virtualenv points at its base
		// interpreter by path.
		s = step{"python3", []string{"-c", "import sys; print(sys.version); print(sys.base_prefix)"}}
	case "go":
		s = step{"go", []string{"env", "GOVERSION", "GOOS", "GOARCH"}}
	}
	out, err := d.run(ctx, s, env, 4<<10)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Install runs the clean install in the program's folder. env is Spec.Env
// (registry credentials, a proxy): the install sees it as Pulumi would.
// Its *DepsError names the command and holds its last lines of output;
// redact it with the spec's secrets before showing it.
func (d *Deps) Install(ctx context.Context, env map[string]string) error {
	for _, s := range d.install {
		if _, err := d.run(ctx, s, env, 64<<10); err != nil {
			return err
		}
	}
	for _, p := range d.Paths {
		if _, err := os.Stat(filepath.Join(d.Base, filepath.FromSlash(p))); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return &DepsError{Reason: fmt.Sprintf("%s made no %s", d.install[len(d.install)-1], p)}
			}
			return err
		}
	}
	return nil
}

// Installs says what Install runs, for messages.
func (d *Deps) Installs() string {
	var s []string
	for _, st := range d.install {
		s = append(s, st.String())
	}
	return strings.Join(s, " && ")
}
