package oci

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TagInfo is one tag of a repository with its manifest's annotations.
type TagInfo struct {
	Tag, Digest, Source, Revision, Created string
}

// signatureTag matches the tags cosign and the referrers tag schema add
// next to artifacts ("sha256-HEX", "sha256-HEX.sig", .att, .sbom): they
// are not artifacts and List leaves them out.
var signatureTag = regexp.MustCompile(`^sha256-[0-9a-f]{64}(\.[a-z]+)?$`)

// List gives the repository's artifact tags, sorted, with digests and the
// source, revision and created annotations (one manifest GET per tag).
func (c *Client) List(ctx context.Context, repository string) ([]TagInfo, error) {
	opts := c.session(ctx)
	tags, err := c.listTags(repository, opts)
	if err != nil {
		return nil, err
	}
	sort.Strings(tags)
	var out []TagInfo
	for _, t := range tags {
		if signatureTag.MatchString(t) {
			continue
		}
		m, dgst, err := c.manifest(Reference{Repository: repository, Tag: t}, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, TagInfo{
			Tag: t, Digest: dgst,
			Source: m.Annotations[AnnotationSource], Revision: m.Annotations[AnnotationRevision], Created: m.Annotations[AnnotationCreated],
		})
	}
	return out, nil
}

// Tag adds tag to the manifest ref names, without moving any bytes but the
// manifest.
func (c *Client) Tag(ctx context.Context, ref Reference, tag string) error {
	if !validTag.MatchString(tag) {
		return fmt.Errorf("invalid tag %q: a tag is up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'", tag)
	}
	n, err := ref.name(c.NameOptions()...)
	if err != nil {
		return err
	}
	dst, err := Reference{Repository: ref.Repository, Tag: tag}.name(c.NameOptions()...)
	if err != nil {
		return fmt.Errorf("invalid tag %q: %w", tag, err)
	}
	desc, err := remote.Get(n, c.RemoteOptions(ctx)...)
	if err != nil {
		return fmt.Errorf("tagging %s: %w", ref, c.classify(err, ref.Registry(), ref.String()))
	}
	if err := remote.Put(dst, desc, c.RemoteOptions(ctx)...); err != nil {
		return fmt.Errorf("tagging %s as %s: %w", ref, tag, c.classify(err, ref.Registry(), dst.String()))
	}
	return nil
}
