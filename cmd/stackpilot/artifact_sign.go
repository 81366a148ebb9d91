package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/oci/cosign"
)

type signFormats struct{ bundle, legacy bool }

func (c *cli) newArtifactSignCmd(reg *registryOptions) *cobra.Command {
	var key string
	var formats signFormats
	cmd := &cobra.Command{
		Use:   "sign oci://REGISTRY/REPO:TAG|@DIGEST --key cosign.key",
		Short: "Sign an artifact's digest with a cosign private key, offline; prints the digest",
		Long: `Signs the manifest digest the reference names (a tag is resolved once, and the
digest is what is signed) the way cosign v3 does with --key, offline: a
Sigstore bundle as an OCI referrer (the referrers tag schema when the registry
has no referrers API) and the legacy sha256-HEX.sig tag that older verifiers
read. Verifiable by ` + "`stackpilot artifact verify`" + `, by ` + "`cosign verify --key cosign.pub\n--insecure-ignore-tlog=true`" + `, by Flux's OCIRepository and by a Stack's verify.
The key's password: COSIGN_PASSWORD, else asked on the terminal.`,
		Example: `  COSIGN_PASSWORD=... stackpilot artifact sign oci://ghcr.io/org/infra:v1.2.0 --key cosign.key`,
		Args:    exactArgs(1, "one reference, oci://REGISTRY/REPO:TAG or @sha256:DIGEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseRef(args[0], false)
			if err != nil {
				return err
			}
			if !formats.bundle && !formats.legacy {
				return usageErrorf("--bundle=false and --legacy=false leave nothing to write")
			}
			signer, err := c.loadSigner(key)
			if err != nil {
				return err
			}
			cl, err := reg.client(ref.Registry())
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			dgst, err := resolve(ctx, cl, ref)
			if err != nil {
				return reg.explain(err)
			}
			return c.signDigest(ctx, reg, cl, oci.Reference{Repository: ref.Repository, Digest: dgst}, signer, formats, true)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "The cosign private key file (cosign.key; required).")
	cmd.Flags().BoolVar(&formats.bundle, "bundle", true, "Write the Sigstore bundle as an OCI referrer (what cosign v3 reads).")
	cmd.Flags().BoolVar(&formats.legacy, "legacy", true, "Write the legacy sha256-HEX.sig tag (what cosign v2 and older verifiers read).")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagFilename("key", "key")
	return cmd
}

// signDigest signs ref (a digest) and says so; push --sign-key uses it too.
func (c *cli) signDigest(ctx context.Context, reg *registryOptions, cl *oci.Client, ref oci.Reference, s *cosign.Signer, f signFormats, printDigest bool) error {
	err := cosign.Sign(ctx, ref.Repository, ref.Digest, s, cosign.SignOptions{Bundle: f.bundle, Legacy: f.legacy}, cl.RemoteOptions(ctx), cl.NameOptions()...)
	if err != nil {
		return reg.explain(err)
	}
	var what []string
	if f.bundle {
		what = append(what, "Sigstore bundle")
	}
	if f.legacy {
		what = append(what, "legacy .sig tag")
	}
	if printDigest {
		fmt.Fprintln(c.stdout, ref.Digest)
	}
	fmt.Fprintf(c.stderr, "Signed %s with key %s (%s)\n", ociURL(ref), s.PublicKey().KeyID(), strings.Join(what, " and "))
	return nil
}

func (c *cli) newArtifactVerifyCmd(reg *registryOptions) *cobra.Command {
	var keyFiles []string
	cmd := &cobra.Command{
		Use:   "verify oci://REGISTRY/REPO:TAG|@DIGEST --key cosign.pub [--key other.pub]...",
		Short: "Verify an artifact's cosign signature with public keys, offline; prints the digest",
		Long: `Succeeds when a signature of the digest the reference names (a Sigstore bundle
referrer, or the legacy sha256-HEX.sig tag) verifies with any of the keys, as a
Stack's spec.source.oci.verify does: offline, no Rekor, Fulcio or TUF, only the
keys are trusted. Exit 1 with what was checked when none verifies.`,
		Example: `  stackpilot artifact verify oci://ghcr.io/org/infra:v1.2.0 --key cosign.pub
  stackpilot artifact verify oci://ghcr.io/org/infra:v1.2.0 --key team-a.pub --key team-b.pub`,
		Args: exactArgs(1, "one reference, oci://REGISTRY/REPO:TAG or @sha256:DIGEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseRef(args[0], false)
			if err != nil {
				return err
			}
			keys := make([]cosign.PublicKey, 0, len(keyFiles))
			names := map[string]string{}
			for _, f := range keyFiles {
				pem, err := os.ReadFile(f)
				if err != nil {
					return fmt.Errorf("reading the public key: %w", err)
				}
				k, err := cosign.LoadPublicKey(f, pem)
				if err != nil {
					return err
				}
				keys = append(keys, k)
				names[k.KeyID()] = f
			}
			cl, err := reg.client(ref.Registry())
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			dgst, err := resolve(ctx, cl, ref)
			if err != nil {
				return reg.explain(err)
			}
			v, err := cosign.Verify(ctx, ref.Repository, dgst, keys, cl.RemoteOptions(ctx), cl.NameOptions()...)
			if err != nil {
				return reg.explain(err)
			}
			fmt.Fprintln(c.stdout, dgst)
			fmt.Fprintf(c.stderr, "Verified %s@%s: a %s signature by %s (key %s)\n", ociURL(ref), dgst, v.Format, names[v.KeyID], v.KeyID)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keyFiles, "key", nil, "A cosign public key file (cosign.pub); repeatable, any one verifying is enough (required).")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagFilename("key", "pub")
	return cmd
}

// resolve gives the reference's digest: its own, or the tag's now.
func resolve(ctx context.Context, cl *oci.Client, ref oci.Reference) (string, error) {
	if ref.Digest != "" {
		return ref.Digest, nil
	}
	return cl.Digest(ctx, ref)
}
