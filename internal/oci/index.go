package oci

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// platformManifest picks the image of an index to read a program from:
// `docker buildx build --push` writes an index even for one platform, often
// with attestation manifests (platform unknown/unknown) beside it. A
// program is platform independent, so the image for this machine's
// platform is taken, or else the only image there is.
func (c *Client) platformManifest(ref Reference, n name.Reference, raw []byte, opts []remote.Option) (*v1.Manifest, error) {
	idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the index of %s: %w", ref, err)
	}
	var images []v1.Descriptor
	var platforms []string
	for _, d := range idx.Manifests {
		if !d.MediaType.IsImage() || d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" ||
			(d.Platform != nil && d.Platform.OS == "unknown") {
			continue
		}
		images = append(images, d)
		if d.Platform != nil {
			platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		}
	}
	var chosen *v1.Descriptor
	for i, d := range images {
		if d.Platform != nil && d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH {
			chosen = &images[i]
			break
		}
	}
	if chosen == nil && len(images) == 1 {
		chosen = &images[0]
	}
	if chosen == nil {
		return nil, fmt.Errorf("%s is an image index without an image for %s/%s (it has: %s): use the digest of one platform's image", ref, runtime.GOOS, runtime.GOARCH, strings.Join(platforms, ", "))
	}
	child := n.Context().Digest(chosen.Digest.String())
	desc, err := remote.Get(child, opts...)
	if err != nil {
		return nil, fmt.Errorf("fetching %s from the index %s: %w", chosen.Digest, ref, c.classify(err, ref.Registry(), child.String()))
	}
	if desc.Digest != chosen.Digest {
		return nil, fmt.Errorf("the registry served manifest %s for %s", desc.Digest, child)
	}
	return v1.ParseManifest(bytes.NewReader(desc.Manifest))
}
