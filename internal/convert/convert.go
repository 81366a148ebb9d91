// Package convert turns Pulumi Kubernetes Operator v2 manifests (pulumi.com/v1
// Stack and Program) into Stackpilot manifests. It is pure: it reads the
// documents it is given and never the cluster, so a value PKO took from a
// Secret stays in that Secret and a field that cannot be carried over becomes
// a Warning that says why.
package convert

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Options say where converted Programs will be served from.
type Options struct {
	// ProgramURL is the Git repository (http(s)://, ssh://) or OCI repository
	// (oci://) that the program directories will be committed or pushed to;
	// Stacks with a programRef point at it. Empty leaves a placeholder URL
	// (and a warning).
	ProgramURL string
	// ProgramRef is the branch (Git, default main) or tag (OCI, default latest)
	// of ProgramURL.
	ProgramRef string
}

// PlaceholderProgramURL stands in for the repository of converted Programs
// until the user names it.
const PlaceholderProgramURL = "https://git.example.com/CHANGE-ME/programs.git"

// Result is the conversion of a set of documents.
type Result struct {
	// Objects are the output manifests in input order: for each Stack, the
	// Secrets it needs (made from PKO literal values) then the Stack; other
	// documents unchanged.
	Objects []any
	// Programs are the program directories made from Program objects.
	Programs []Program
	// Warnings list every field that was not carried over, and why.
	Warnings []Warning
}

// Program is one converted Program: a directory holding a Pulumi.yaml.
type Program struct {
	Namespace, Name string
	// Dir is the directory's path relative to --program-dir (and the Stack's
	// spec.source.dir).
	Dir string
	// PulumiYAML is the content of Dir/Pulumi.yaml.
	PulumiYAML []byte
}

// Warning is one field that could not be carried over.
type Warning struct {
	Object string // "Stack infra/web"
	Field  string // "spec.workspaceTemplate"
	Why    string // what happens to it and what to do instead
}

func (w Warning) String() string {
	return fmt.Sprintf("%s: %s: %s", w.Object, w.Field, w.Why)
}

// YAML renders the objects as one multi-document YAML stream.
func (r *Result) YAML() ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range r.Objects {
		out, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(out)
	}
	return buf.Bytes(), nil
}

// Convert reads a multi-document YAML (or JSON) stream and converts every PKO
// Stack and Program in it. Documents of other kinds pass through unchanged,
// so a file holding Secrets beside the Stacks stays whole.
func Convert(r io.Reader, opts Options) (*Result, error) {
	docs, err := readDocuments(r)
	if err != nil {
		return nil, err
	}
	c := &converter{opts: opts, res: &Result{}, programs: map[string]Program{}}
	// Programs first: a Stack names its Program, wherever it is in the file.
	for _, d := range docs {
		if d.obj.Kind == "Program" && isPKO(d.obj.APIVersion) {
			if err := c.convertProgram(d.obj); err != nil {
				return nil, err
			}
		}
	}
	for _, d := range docs {
		switch {
		case isPKO(d.obj.APIVersion) && d.obj.Kind == "Stack":
			if err := c.convertStack(d.obj); err != nil {
				return nil, err
			}
		case isPKO(d.obj.APIVersion) && d.obj.Kind == "Program":
		case isPKO(d.obj.APIVersion) || strings.HasPrefix(d.obj.APIVersion, "auto."+pkoGroup+"/"):
			c.res.Warnings = append(c.res.Warnings, Warning{
				Object: objectName(d.obj.Kind, d.obj.Metadata), Field: "kind",
				Why: "not converted: only pulumi.com/v1 Stack and Program have a Stackpilot equivalent (the controller runs Pulumi itself, without Workspaces or Updates)",
			})
		default:
			c.res.Objects = append(c.res.Objects, d.raw)
		}
	}
	return c.res, nil
}

type converter struct {
	opts     Options
	res      *Result
	programs map[string]Program // by namespace/name
}

type document struct {
	obj pkoObject
	raw map[string]any
}

// readDocuments splits the stream into documents, unwrapping kind: List (what
// `kubectl get -o yaml` prints).
func readDocuments(r io.Reader) ([]document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs []document
	for n := 1; ; n++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		raw, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, fmt.Errorf("document %d is not valid YAML: %w", n, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		more, err := decodeDocument(raw, n)
		if err != nil {
			return nil, err
		}
		docs = append(docs, more...)
	}
}

func decodeDocument(raw []byte, n int) ([]document, error) {
	var head struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("document %d is not a Kubernetes object: %w", n, err)
	}
	if head.Kind == "List" || strings.HasSuffix(head.Kind, "List") && head.Items != nil {
		var docs []document
		for _, item := range head.Items {
			more, err := decodeDocument(item, n)
			if err != nil {
				return nil, err
			}
			docs = append(docs, more...)
		}
		return docs, nil
	}
	var d document
	if err := json.Unmarshal(raw, &d.obj); err != nil {
		return nil, fmt.Errorf("document %d is not a Kubernetes object: %w", n, err)
	}
	if err := json.Unmarshal(raw, &d.raw); err != nil {
		return nil, fmt.Errorf("document %d is not a Kubernetes object: %w", n, err)
	}
	if d.obj.Kind == "" || d.obj.APIVersion == "" {
		return nil, fmt.Errorf("document %d has no apiVersion or kind: is it a Kubernetes manifest?", n)
	}
	return []document{d}, nil
}

func isPKO(apiVersion string) bool {
	return strings.HasPrefix(apiVersion, pkoGroup+"/")
}

func objectName(kind string, m pkoMeta) string {
	if m.Namespace == "" {
		return kind + " " + m.Name
	}
	return kind + " " + m.Namespace + "/" + m.Name
}

// stackObject is a Stackpilot Stack as it is printed: no status, no server
// fields.
type stackObject struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   pkoMeta            `json:"metadata"`
	Spec       v1alpha1.StackSpec `json:"spec"`
}

// secretObject is a Secret the conversion makes from PKO literal values.
type secretObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   pkoMeta           `json:"metadata"`
	Type       string            `json:"type"`
	StringData map[string]string `json:"stringData"`
}
