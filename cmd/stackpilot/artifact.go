package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stackpilot/stackpilot/internal/oci"
)

// newArtifactCmd groups the verbs on Pulumi programs as OCI artifacts in
// Flux's format (internal/oci); one file per verb: artifact_*.go.
func (c *cli) newArtifactCmd() *cobra.Command {
	cmd := groupCmd("artifact", "Package, push, pull, sign and verify Pulumi programs as OCI artifacts",
		`Pulumi programs as OCI artifacts in Flux's format (the format Flux's
OCIRepository reads and `+"`flux push artifact`"+` writes), which a Stack's
spec.source.oci delivers. Signatures are cosign-compatible, key-based and offline.

Registry credentials: --creds user:pass, else the Docker config file
($DOCKER_CONFIG/config.json, else ~/.docker/config.json, with its credential
helpers), else anonymous.`)
	var reg registryOptions
	reg.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		c.newArtifactPushCmd(&reg),
		c.newArtifactPullCmd(&reg),
		c.newArtifactListCmd(&reg),
		c.newArtifactTagCmd(&reg),
		c.newArtifactDiffCmd(&reg),
		c.newArtifactSignCmd(&reg),
		c.newArtifactVerifyCmd(&reg),
		c.newArtifactKeygenCmd(),
	)
	return cmd
}

// registryOptions are the flags every artifact verb shares.
type registryOptions struct {
	creds    string
	insecure bool
}

func (o *registryOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.creds, "creds", "", "Registry credentials as user:password (or user:token); default: the Docker config file.")
	fs.BoolVar(&o.insecure, "insecure", false, "Allow plain HTTP, for loopback and test registries only (credentials and artifacts travel unencrypted).")
}

// client is an oci.Client for registry (host[:port]) with the credentials
// the flags or the Docker config give.
func (o *registryOptions) client(registry string) (*oci.Client, error) {
	var creds *oci.Credentials
	var err error
	if o.creds != "" {
		if creds, err = oci.CredentialsFromUserPass(o.creds); err != nil {
			return nil, &usageError{"--creds: " + err.Error()}
		}
	} else if creds, err = oci.CredentialsFromDockerConfigFile(registry); err != nil {
		return nil, fmt.Errorf("%w; fix the file or pass --creds user:password", err)
	}
	return &oci.Client{Credentials: creds, Insecure: o.insecure, UserAgent: "stackpilot/" + cliVersion()}, nil
}

// explain adds what to do to the library's errors where the CLI's flags
// are the fix.
func (o *registryOptions) explain(err error) error {
	if err != nil && !o.insecure && strings.Contains(err.Error(), "refusing plain HTTP") {
		return fmt.Errorf("%w; pass --insecure if this is a loopback or test registry", err)
	}
	return err
}

// parseRef parses an oci:// reference argument as a usage error when it is
// wrong; needTag refuses digests (push, tag: a tag is written).
func parseRef(arg string, needTag bool) (oci.Reference, error) {
	ref, err := oci.ParseReference(arg)
	if err != nil {
		return oci.Reference{}, &usageError{err.Error()}
	}
	if needTag && ref.Tag == "" {
		return oci.Reference{}, usageErrorf("%s: give a tag (oci://%s:v1), not a digest", arg, ref.Repository)
	}
	return ref, nil
}

// signalContext is cancelled by Ctrl-C or SIGTERM, so that a verb stops
// its requests.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// ociURL is the reference as the user writes it.
func ociURL(ref oci.Reference) string { return oci.URLPrefix + ref.String() }
