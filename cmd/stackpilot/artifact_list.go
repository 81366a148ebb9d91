package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/internal/oci"
)

// listedTag is one row of `artifact list`, in the JSON and YAML outputs.
type listedTag struct {
	Tag      string `json:"tag"`
	Digest   string `json:"digest"`
	Revision string `json:"revision,omitempty"`
	Source   string `json:"source,omitempty"`
	Created  string `json:"created,omitempty"`
}

func (c *cli) newArtifactListCmd(reg *registryOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list oci://REGISTRY/REPO",
		Short: "List a repository's artifact tags with their digests and revisions",
		Long: `Lists the repository's tags, sorted, with the manifest digest and the source,
revision and created annotations of each (one manifest request per tag). The
signature tags cosign adds (sha256-HEX.sig, sha256-HEX) are left out.`,
		Example: `  stackpilot artifact list oci://ghcr.io/org/infra
  stackpilot artifact list oci://ghcr.io/org/infra -o json`,
		Args: exactArgs(1, "one repository, oci://REGISTRY/REPO"),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, err := oci.ParseURL(args[0])
			if err != nil {
				return &usageError{err.Error()}
			}
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			cl, err := reg.client(oci.Reference{Repository: repo}.Registry())
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			tags, err := cl.List(ctx, repo)
			if err != nil {
				return reg.explain(err)
			}
			rows := make([]listedTag, 0, len(tags))
			for _, t := range tags {
				rows = append(rows, listedTag{Tag: t.Tag, Digest: t.Digest, Revision: t.Revision, Source: t.Source, Created: t.Created})
			}
			return writeList(c.stdout, format, rows)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func writeList(w io.Writer, format string, rows []listedTag) error {
	switch format {
	case "json", "yaml":
		return writeStructured(w, format, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "TAG\tDIGEST\tREVISION\tCREATED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Tag, r.Digest, orDash(r.Revision), orDash(r.Created))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// addOutputFlag is -o table|json|yaml, for every verb that lists.
func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "table", "Output format: table, json or yaml.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

func outputFormat(s string) (string, error) {
	switch s {
	case "table", "json", "yaml":
		return s, nil
	}
	return "", usageErrorf("-o %q: want table, json or yaml", s)
}

func writeStructured(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
