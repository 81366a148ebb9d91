package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stackpilot/stackpilot/internal/convert"
)

type convertOptions struct {
	file       string
	programDir string
	programURL string
	programRef string
}

func (c *cli) newConvertCmd() *cobra.Command {
	var o convertOptions
	cmd := &cobra.Command{
		Use:   "convert -f FILE [--program-dir DIR]",
		Short: "Convert Pulumi Kubernetes Operator Stacks and Programs to Stackpilot manifests",
		Long: `Reads Pulumi Kubernetes Operator v2 manifests (pulumi.com/v1 Stack and Program;
one or more YAML documents, or a kind: List as kubectl get -o yaml prints) and
prints the equivalent Stackpilot manifests on stdout. It reads no cluster.

A Stack's projectRepo, branch, commit, repoDir and gitAuth become source.git;
fluxSource becomes source.sourceRef; stack, backend (Pulumi Cloud when unset,
as in PKO), config, configRef, secretsRef and envRefs, secretsProvider,
refresh, targets, destroyOnFinalize, resyncFrequencySeconds, serviceAccountName
(the workspace template's when it names one; "default", PKO's, when nothing
does: the program keeps the identity it had), prerequisites and preview carry
over. A stack name the API server would refuse and a file:// backend (a path
on the controller's filesystem now, not in a workspace Pod) are warned about. Literal values become Secrets printed
before their Stack. A Program becomes a directory DIR/<name> holding its
Pulumi.yaml: commit it to a Git repository (or push it with stackpilot artifact
push) and name that with --program-url, and the Stack points at it.

Every field that cannot be carried over is one line on stderr, starting
"warning:", that says why and what to do instead. Other documents in the input
(Secrets, ConfigMaps, ...) are printed unchanged. docs/migrating-from-pko.md has
the field table.`,
		Example: `  stackpilot convert -f pko-stacks.yaml > stacks.yaml
  kubectl get stacks.pulumi.com,programs.pulumi.com -n infra -o yaml | stackpilot convert -f - --program-dir programs
  stackpilot convert -f pko.yaml --program-dir programs --program-url https://github.com/org/programs.git`,
		Args: exactArgs(0, "no arguments; the manifests come from -f FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.convert(&o)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.file, "file", "f", "", "The PKO manifests to convert, a YAML `file`; - reads stdin (required).")
	fs.StringVar(&o.programDir, "program-dir", "", "Write each Program's Pulumi.yaml to `DIR`/<program name>/ (required when the input has Programs).")
	fs.StringVar(&o.programURL, "program-url", "", "The Git (https://, ssh://) or OCI (oci://) repository the program directories will be in; Stacks with a programRef use it (default: a placeholder URL, with a warning).")
	fs.StringVar(&o.programRef, "program-ref", "", "The branch (Git, default main) or tag (OCI, default latest) of --program-url.")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml", "json")
	_ = cmd.MarkFlagDirname("program-dir")
	return cmd
}

func (c *cli) convert(o *convertOptions) error {
	in, closeIn, err := c.openInput(o.file)
	if err != nil {
		return err
	}
	defer closeIn()
	res, err := convert.Convert(in, convert.Options{ProgramURL: o.programURL, ProgramRef: o.programRef})
	if err != nil {
		return fmt.Errorf("%s: %w", displayFile(o.file), err)
	}
	if len(res.Programs) > 0 && o.programDir == "" {
		return usageErrorf("the input has %d Program(s): pass --program-dir DIR to write their Pulumi.yaml files", len(res.Programs))
	}
	out, err := res.YAML()
	if err != nil {
		return err
	}
	// Programs first: a directory that cannot be written prints no Stack
	// pointing at it.
	for _, p := range res.Programs {
		path, err := writeProgramDir(o.programDir, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "wrote %s (%s): commit or push it, then apply the Stacks\n", path, programName(p))
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(c.stderr, "warning: %s\n", w)
	}
	_, err = c.stdout.Write(out)
	return err
}

// openInput opens FILE, or stdin for "-".
func (c *cli) openInput(file string) (io.Reader, func(), error) {
	if file == "-" {
		return c.stdin, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("%w; -f takes a YAML file, or - for stdin", err)
	}
	return f, func() { _ = f.Close() }, nil
}

func displayFile(file string) string {
	if file == "-" {
		return "stdin"
	}
	return file
}

// writeProgramDir writes DIR/<dir>/Pulumi.yaml. It never overwrites a different
// file: that may be the user's own program.
func writeProgramDir(root string, p convert.Program) (string, error) {
	dir := filepath.Join(root, filepath.FromSlash(p.Dir))
	path := filepath.Join(dir, "Pulumi.yaml")
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, p.PulumiYAML):
		return path, nil
	case err == nil:
		return "", fmt.Errorf("%s exists and differs from %s; remove it or choose another --program-dir", path, programName(p))
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, p.PulumiYAML, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// programName is "Program ns/name", or "Program name" for one without a
// namespace.
func programName(p convert.Program) string {
	if p.Namespace == "" {
		return "Program " + p.Name
	}
	return "Program " + p.Namespace + "/" + p.Name
}
