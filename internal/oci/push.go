package oci

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PushOptions describe the artifact Push writes.
type PushOptions struct {
	Source, Revision string            // annotations image.source and image.revision
	Created          time.Time         // zero: "1970-01-01T00:00:00Z" (reproducible)
	Annotations      map[string]string // more manifest annotations (they win over the three above)
	IgnorePaths      []string
}

// Push packages dir and pushes it to ref (a tag, or a digest to push
// untagged); returns the manifest digest "sha256:…".
func (c *Client) Push(ctx context.Context, ref Reference, dir string, opts PushOptions) (string, error) {
	n, err := ref.name(c.NameOptions()...)
	if err != nil {
		return "", err
	}
	img, cleanup, err := buildImage(dir, opts)
	if err != nil {
		return "", err
	}
	defer cleanup()
	dgst, err := img.Digest()
	if err != nil {
		return "", err
	}
	if ref.Digest != "" && ref.Digest != dgst.String() {
		return "", fmt.Errorf("the folder packages to %s, not the digest %s given: push to a tag", dgst, ref.Digest)
	}
	if err := remote.Write(n, img, c.RemoteOptions(ctx)...); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, c.classify(err, ref.Registry(), ref.String()))
	}
	return dgst.String(), nil
}

// buildImage packages dir as Flux does: an OCI manifest whose config is
// go-containerregistry's empty image config (created set, rootfs naming
// the layer) under Flux's config media type, one content layer, and the
// source/revision/created annotations. The layer lives in a temp file
// until cleanup.
func buildImage(dir string, opts PushOptions) (v1.Image, func(), error) {
	f, err := os.CreateTemp("", "stackpilot-layer-*.tgz")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.Remove(f.Name()) }
	_, err = BuildLayer(dir, BuildOptions{IgnorePaths: opts.IgnorePaths}, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	img, err := assemble(f.Name(), opts)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return img, cleanup, nil
}

func assemble(layerPath string, opts PushOptions) (v1.Image, error) {
	layer, err := tarball.LayerFromFile(layerPath, tarball.WithMediaType(ContentMediaType))
	if err != nil {
		return nil, err
	}
	created := opts.Created.UTC().Truncate(time.Second)
	if opts.Created.IsZero() {
		created = epoch
	}
	annotations := map[string]string{
		AnnotationCreated: created.Format(time.RFC3339),
	}
	if opts.Source != "" {
		annotations[AnnotationSource] = opts.Source
	}
	if opts.Revision != "" {
		annotations[AnnotationRevision] = opts.Revision
	}
	maps.Copy(annotations, opts.Annotations)

	cfg, err := empty.Image.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg.Created = v1.Time{Time: created}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	img = mutate.Annotations(img, annotations).(v1.Image)
	return mutate.Append(img, mutate.Addendum{Layer: layer})
}
