package testenv

import (
	"context"
	"strings"

	fluxoci "github.com/fluxcd/pkg/oci"
	"github.com/fluxcd/pkg/sourceignore"
)

// PushFluxArtifact packages dir and pushes it to ref ("host/repo:tag",
// without "oci://") with Flux's own code (github.com/fluxcd/pkg/oci, what
// `flux push artifact` runs), with the same default ignore paths as the
// flux CLI; returns the manifest digest "sha256:…". Test-only: it links
// Flux's OCI client, which the CLI and controller must not.
func PushFluxArtifact(t TB, ctx context.Context, ref, dir, source, revision string) string {
	t.Helper()
	ignore := append(strings.Split(sourceignore.ExcludeVCS, ","), strings.Split(sourceignore.ExcludeExt, ",")...)
	c := fluxoci.NewClient(fluxoci.DefaultOptions())
	pushed, err := c.Push(ctx, ref, dir,
		fluxoci.WithPushMetadata(fluxoci.Metadata{Source: source, Revision: revision}),
		fluxoci.WithPushIgnorePaths(ignore...),
	)
	if err != nil {
		t.Fatalf("flux push artifact %s: %v", ref, err)
	}
	_, dgst, ok := strings.Cut(pushed, "@")
	if !ok {
		t.Fatalf("flux push artifact %s: unexpected result %q", ref, pushed)
	}
	return dgst
}

// PullFluxArtifact pulls ref ("host/repo:tag" or "host/repo@sha256:…") into
// dst with Flux's own code, as `flux pull artifact` does, and returns the
// revision annotation it read: it proves Flux reads what we write.
func PullFluxArtifact(t TB, ctx context.Context, ref, dst string) string {
	t.Helper()
	c := fluxoci.NewClient(fluxoci.DefaultOptions())
	meta, err := c.Pull(ctx, ref, dst)
	if err != nil {
		t.Fatalf("flux pull artifact %s: %v", ref, err)
	}
	return meta.Revision
}
