package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stackpilot/stackpilot/internal/atomicfile"
)

// applyIgnoreChanges makes an up or preview leave the property paths of
// spec.IgnoreChanges as they are in the world. A Pulumi YAML program gets them
// as options.ignoreChanges of its resources, in the work dir's copy of the
// program. A URN that cannot be handled that way (another runtime, a resource
// the YAML does not declare literally, a generated program) is returned, to be
// excluded from the run as a whole: an ignored path must never be put back.
//
// A URN with no paths is a resource ignored as a whole: it is excluded.
func applyIgnoreChanges(workDir string, ignore map[string][]string) (excluded []string, err error) {
	urns := make([]string, 0, len(ignore))
	for urn, paths := range ignore {
		if len(paths) > 0 {
			urns = append(urns, urn)
		} else {
			excluded = append(excluded, urn)
		}
	}
	sort.Strings(urns)
	defer sort.Strings(excluded)
	if len(urns) == 0 {
		return excluded, nil
	}
	file, err := yamlProgramFile(workDir)
	if err != nil {
		return nil, err
	}
	if file == "" {
		return append(excluded, urns...), nil
	}
	prog, err := readYAMLProgram(file)
	if err != nil {
		return nil, err
	}
	changed := false
	for _, urn := range urns {
		res := prog.resource(urn)
		if res == nil {
			excluded = append(excluded, urn)
			continue
		}
		ok, added := addIgnoreChanges(res, ignore[urn])
		if !ok {
			excluded = append(excluded, urn)
			continue
		}
		changed = changed || added
	}
	if changed {
		if err := prog.write(); err != nil {
			return nil, fmt.Errorf("write the ignored properties into %s: %w", filepath.Base(file), err)
		}
	}
	return excluded, nil
}

// yamlProgramFile is the file Pulumi YAML reads the program from, or "" when
// the project is not a plain YAML program: another runtime, a `compiler`
// option (the YAML is generated at run time), or a Main.json. Like the CLI,
// the program directory is `main` (or, when main names a file, its directory);
// like the YAML language host, the file in it is Main.yaml, else Pulumi.yaml.
func yamlProgramFile(workDir string) (string, error) {
	var project struct {
		Runtime yaml.Node `yaml:"runtime"`
		Main    string    `yaml:"main"`
	}
	projectFile := ""
	for _, name := range projectFileNames {
		data, err := os.ReadFile(filepath.Join(workDir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if err := yaml.Unmarshal(data, &project); err != nil {
			return "", &ConfigError{Reason: fmt.Sprintf("%s is not valid YAML: %v", name, err)}
		}
		projectFile = name
		break
	}
	if projectFile == "" {
		return "", &ConfigError{Reason: "no Pulumi.yaml in the program directory"}
	}
	if !isPlainYAMLRuntime(&project.Runtime) {
		return "", nil
	}
	dir := workDir
	if project.Main != "" {
		main := filepath.Join(workDir, project.Main)
		info, err := os.Stat(main)
		if err != nil {
			return "", &ConfigError{Reason: fmt.Sprintf("%s: main %q cannot be read: %v", projectFile, project.Main, err)}
		}
		dir = main
		if !info.IsDir() {
			dir = filepath.Dir(main)
		}
	}
	for _, name := range []string{"Main.json", "Main.yaml", "Pulumi.yaml"} {
		_, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if name == "Main.json" {
			return "", nil // JSON: not rewritten, its resources are excluded instead
		}
		return filepath.Join(dir, name), nil
	}
	return "", nil
}

// isPlainYAMLRuntime reads `runtime: yaml` and `runtime: {name: yaml}`; a
// `compiler` option means the program is generated, so not in the file.
func isPlainYAMLRuntime(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value == "yaml"
	case yaml.MappingNode:
		name := mapValue(n, "name")
		if name == nil || name.Kind != yaml.ScalarNode || name.Value != "yaml" {
			return false
		}
		opts := mapValue(n, "options")
		return opts == nil || mapValue(opts, "compiler") == nil
	}
	return false
}

// yamlProgram is a YAML program file, parsed as nodes so that what the runner
// does not touch (comments, order, quoting) stays as it was.
type yamlProgram struct {
	path string
	mode os.FileMode
	doc  yaml.Node
}

func readYAMLProgram(path string) (*yamlProgram, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	p := &yamlProgram{path: path, mode: info.Mode().Perm()}
	if err := yaml.Unmarshal(data, &p.doc); err != nil {
		return nil, &ConfigError{Reason: fmt.Sprintf("%s is not valid YAML: %v", filepath.Base(path), err)}
	}
	return p, nil
}

// resource finds the resource of urn among the program's resources: its
// logical name is the resource's `name:` when set, else its key, and its type
// is the resource's `type:`.
func (p *yamlProgram) resource(urn string) *yaml.Node {
	typ, name, hasParent, ok := parseURN(urn)
	if !ok || len(p.doc.Content) == 0 {
		return nil
	}
	resources := mapValue(p.doc.Content[0], "resources")
	if resources == nil || resources.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(resources.Content); i += 2 {
		key, res := resources.Content[i], resources.Content[i+1]
		if res.Kind != yaml.MappingNode {
			continue
		}
		logical := key.Value
		if n := mapValue(res, "name"); n != nil {
			if n.Kind != yaml.ScalarNode || strings.Contains(n.Value, "${") {
				continue // computed: no literal name to compare
			}
			logical = n.Value
		}
		t := mapValue(res, "type")
		if logical != name || t == nil || t.Kind != yaml.ScalarNode || !sameTypeToken(t.Value, typ) {
			continue
		}
		// A child of a component has a parent in its URN; a YAML resource has
		// one only when its options name it.
		var parent *yaml.Node
		if opts := mapValue(res, "options"); opts != nil && opts.Kind == yaml.MappingNode {
			parent = mapValue(opts, "parent")
		}
		if (parent != nil) != hasParent {
			continue
		}
		return res
	}
	return nil
}

// write replaces the program file with the edited one. It never writes
// through the file: it may be a hard link into the shared artifact cache.
func (p *yamlProgram) write() error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&p.doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return atomicfile.Write(p.path, buf.Bytes(), p.mode)
}

// addIgnoreChanges merges paths into the resource's options.ignoreChanges. It
// reports false when the options cannot take them (not a mapping, or an
// ignoreChanges that is not a list), and whether anything was added.
func addIgnoreChanges(res *yaml.Node, paths []string) (ok, added bool) {
	opts := mapValue(res, "options")
	if opts == nil {
		opts = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		res.Content = append(res.Content, scalar("options"), opts)
	}
	if opts.Kind != yaml.MappingNode {
		return false, false
	}
	list := mapValue(opts, "ignoreChanges")
	if list == nil {
		list = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		opts.Content = append(opts.Content, scalar("ignoreChanges"), list)
	}
	if list.Kind != yaml.SequenceNode {
		return false, false
	}
	have := map[string]bool{}
	for _, item := range list.Content {
		if item.Kind != yaml.ScalarNode {
			return false, false
		}
		have[item.Value] = true
	}
	for _, path := range paths {
		if path == "" || have[path] {
			continue
		}
		have[path] = true
		list.Content = append(list.Content, scalar(path))
		added = true
	}
	return true, added
}

// parseURN splits urn:pulumi:STACK::PROJECT::TYPE::NAME, where TYPE may be
// "parent$type" (a child's URN carries its parents' types).
func parseURN(urn string) (typ, name string, hasParent, ok bool) {
	rest, found := strings.CutPrefix(urn, "urn:pulumi:")
	if !found {
		return "", "", false, false
	}
	parts := strings.SplitN(rest, "::", 4)
	if len(parts) != 4 || parts[2] == "" || parts[3] == "" {
		return "", "", false, false
	}
	types := strings.Split(parts[2], "$")
	return types[len(types)-1], parts[3], len(types) > 1, true
}

// sameTypeToken compares a type as a YAML program writes it with the type the
// engine recorded. Pulumi YAML accepts the short "pkg:mod:Type" for the
// canonical "pkg:mod/type:Type" and "pkg:Type" for "pkg:index:Type".
func sameTypeToken(written, recorded string) bool {
	if written == recorded {
		return true
	}
	w := strings.Split(written, ":")
	switch len(w) {
	case 2:
		return w[0]+":index:"+w[1] == recorded
	case 3:
		if strings.Contains(w[1], "/") || w[2] == "" {
			return false
		}
		lower := strings.ToLower(w[2][:1]) + w[2][1:]
		return w[0]+":"+w[1]+"/"+lower+":"+w[2] == recorded
	}
	return false
}

// mapValue is the value of key in a mapping node, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

// excludeArgs are the CLI flags that leave the excluded URNs out of the run.
func excludeArgs(urns []string) []string {
	var args []string
	for _, urn := range slices.Sorted(slices.Values(urns)) {
		args = append(args, "--exclude", urn)
	}
	return args
}
