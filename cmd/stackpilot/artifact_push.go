package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/oci/cosign"
)

type pushOptions struct {
	path        string
	source      string
	revision    string
	annotations []string
	ignorePaths []string
	created     string
	signKey     string
}

func (c *cli) newArtifactPushCmd(reg *registryOptions) *cobra.Command {
	var o pushOptions
	cmd := &cobra.Command{
		Use:   "push oci://REGISTRY/REPO:TAG --path DIR",
		Short: "Package a program folder as an OCI artifact and push it; prints the digest",
		Long: `Packages DIR as an OCI artifact in Flux's format and pushes it. The archive is
reproducible: entries sorted, owners and times zeroed, modes 0644/0755, so the
same folder gives the same digest on any machine and in any time zone; the
created annotation is fixed (1970-01-01T00:00:00Z) unless --created says
otherwise. .sourceignore files and Flux's default ignore list apply.

--source and --revision default from the Git checkout DIR is in, when it is
one: the "origin" remote's URL without credentials, and BRANCH@sha1:COMMIT
(sha1:COMMIT on a detached HEAD). When the checkout has uncommitted changes
to files under DIR that the artifact holds, it holds them as they are on disk,
and push warns that the revision does not describe them.

The digest goes to stdout alone; what was pushed is said on stderr.`,
		Example: `  stackpilot artifact push oci://ghcr.io/org/infra:v1.2.0 --path ./infra
  stackpilot artifact push oci://ghcr.io/org/infra:v1.2.0 --path ./infra --sign-key cosign.key
  stackpilot artifact push oci://127.0.0.1:5000/infra:dev --path . --insecure --created now`,
		Args: exactArgs(1, "one reference, oci://REGISTRY/REPO:TAG"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.push(cmd, reg, &o, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.path, "path", "", "The folder to package (required).")
	fs.StringVar(&o.source, "source", "", "The source annotation (org.opencontainers.image.source); default: the Git checkout's origin URL.")
	fs.StringVar(&o.revision, "revision", "", "The revision annotation (org.opencontainers.image.revision); default: BRANCH@sha1:COMMIT of the Git checkout.")
	fs.StringArrayVar(&o.annotations, "annotation", nil, "A manifest annotation key=value (repeatable); wins over the source, revision and created ones.")
	fs.StringSliceVar(&o.ignorePaths, "ignore-paths", nil, "More gitignore-style patterns to leave out, comma-separated (after .sourceignore and Flux's defaults).")
	fs.StringVar(&o.created, "created", "", "The created annotation: an RFC 3339 time, or \"now\"; default: 1970-01-01T00:00:00Z, so that the digest is reproducible.")
	fs.StringVar(&o.signKey, "sign-key", "", "Sign the pushed digest with this cosign private key `file`, as artifact sign does (password: COSIGN_PASSWORD, else asked).")
	_ = cmd.MarkFlagRequired("path")
	_ = cmd.MarkFlagFilename("sign-key", "key")
	_ = cmd.MarkFlagDirname("path")
	return cmd
}

func (c *cli) push(cmd *cobra.Command, reg *registryOptions, o *pushOptions, arg string) error {
	ref, err := parseRef(arg, true)
	if err != nil {
		return err
	}
	opts := oci.PushOptions{Source: o.source, Revision: o.revision, IgnorePaths: o.ignorePaths}
	if opts.Created, err = parseCreated(o.created); err != nil {
		return err
	}
	if opts.Annotations, err = parseAnnotations(o.annotations); err != nil {
		return err
	}
	// Read the key (and ask its password) before pushing: a wrong
	// password must not leave an unsigned artifact behind.
	var signer *cosign.Signer
	if o.signKey != "" {
		if signer, err = c.loadSigner(o.signKey); err != nil {
			return err
		}
	}
	flags := cmd.Flags()
	if !flags.Changed("source") || !flags.Changed("revision") {
		g, err := gitDefaults(o.path)
		if err != nil {
			return err
		}
		if !flags.Changed("source") {
			opts.Source = g.source
		}
		if !flags.Changed("revision") {
			opts.Revision = g.revision
			if err := c.warnDirty(o, g); err != nil {
				return err
			}
		}
	}
	cl, err := reg.client(ref.Registry())
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	dgst, err := cl.Push(ctx, ref, o.path, opts)
	if err != nil {
		return reg.explain(err)
	}
	fmt.Fprintln(c.stdout, dgst)
	fmt.Fprintf(c.stderr, "Pushed %s to %s@%s%s\n", o.path, ociURL(ref), dgst, describeOrigin(opts.Source, opts.Revision))
	if signer != nil {
		// The digest once more on stdout would break `d=$(stackpilot artifact push ...)`.
		signed := oci.Reference{Repository: ref.Repository, Digest: dgst}
		if err := c.signDigest(ctx, reg, cl, signed, signer, signFormats{bundle: true, legacy: true}, false); err != nil {
			return fmt.Errorf("pushed %s unsigned: %w; sign it with `stackpilot artifact sign %s --key %s`", ociURL(signed), err, ociURL(signed), o.signKey)
		}
	}
	return nil
}

// warnDirty warns when uncommitted changes make the artifact differ from
// the commit its revision names. Only then does it package the folder an
// extra time, to know which files the artifact holds.
func (c *cli) warnDirty(o *pushOptions, g gitOrigin) error {
	if len(g.dirty) == 0 {
		return nil
	}
	layer, err := oci.BuildLayer(o.path, oci.BuildOptions{IgnorePaths: o.ignorePaths}, io.Discard)
	if err != nil {
		return err
	}
	if s := dirtySummary(g.dirty, layer.Files); s != "" {
		c.warnf("%s has uncommitted changes (%s): the artifact holds the files as they are on disk, and the revision %s does not describe them; commit first, or set --revision", o.path, s, g.revision)
	}
	return nil
}

func describeOrigin(source, revision string) string {
	var parts []string
	if source != "" {
		parts = append(parts, "source "+source)
	}
	if revision != "" {
		parts = append(parts, "revision "+revision)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// parseCreated reads --created: "" is the reproducible zero time (the
// library writes 1970-01-01T00:00:00Z), "now" the current time in UTC.
func parseCreated(s string) (time.Time, error) {
	switch s {
	case "":
		return time.Time{}, nil
	case "now":
		return time.Now().UTC().Truncate(time.Second), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usageErrorf("--created %q: want \"now\" or an RFC 3339 time such as 2026-12-01T15:04:05Z", s)
	}
	return t.UTC(), nil
}

func parseAnnotations(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--annotation %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}
