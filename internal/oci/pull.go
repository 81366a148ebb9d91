package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/stackpilot/stackpilot/internal/artifact"
)

// PullOptions bound and select what Pull extracts.
type PullOptions struct {
	// MaxSize bounds the chosen layer's compressed size: checked against
	// the manifest before download, and while reading. 0 = no bound.
	MaxSize int64
	// LayerMediaType: "" = Flux's content type, else the first layer of
	// that type. Any tar or tar+gzip layer works.
	LayerMediaType string
	// MaxExtractedSize bounds the extracted files (a small gzip can
	// expand a lot); 0 = artifact.DefaultMaxBytes.
	MaxExtractedSize int64
}

// Pulled says what Pull extracted.
type Pulled struct {
	Digest      string // manifest digest
	Annotations map[string]string
	LayerDigest string
}

// Manifest fetches a manifest by digest (or tag) without downloading
// layers; it returns the manifest and the digest ref resolves to. For an
// image index (what `docker buildx` pushes) the manifest is that of the
// image for this platform, or the only image; the digest stays the
// index's, the one tags and signatures name.
func (c *Client) Manifest(ctx context.Context, ref Reference) (*v1.Manifest, string, error) {
	return c.manifest(ref, c.session(ctx))
}

func (c *Client) manifest(ref Reference, opts []remote.Option) (*v1.Manifest, string, error) {
	n, err := ref.name(c.NameOptions()...)
	if err != nil {
		return nil, "", err
	}
	desc, err := remote.Get(n, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("fetching the manifest of %s: %w", ref, c.classify(err, ref.Registry(), ref.String()))
	}
	if ref.Digest != "" && desc.Digest.String() != ref.Digest {
		return nil, "", fmt.Errorf("the registry served manifest %s for %s", desc.Digest, ref)
	}
	var m *v1.Manifest
	switch {
	case desc.MediaType.IsIndex():
		if m, err = c.platformManifest(ref, n, desc.Manifest, opts); err != nil {
			return nil, "", err
		}
	case desc.MediaType.IsImage():
		if m, err = v1.ParseManifest(bytes.NewReader(desc.Manifest)); err != nil {
			return nil, "", fmt.Errorf("parsing the manifest of %s: %w", ref, err)
		}
	default:
		return nil, "", fmt.Errorf("%s has media type %s, not an OCI or Docker image manifest", ref, desc.MediaType)
	}
	return m, desc.Digest.String(), nil
}

// chooseLayer picks the layer Pull extracts.
func chooseLayer(m *v1.Manifest, mediaType string) (v1.Descriptor, error) {
	want := mediaType
	if want == "" {
		want = ContentMediaType
	}
	var seen []string
	for _, l := range m.Layers {
		if string(l.MediaType) == want {
			return l, nil
		}
		seen = append(seen, string(l.MediaType))
	}
	return v1.Descriptor{}, fmt.Errorf("no layer of media type %s (layers: %s): set the layer selector's media type to one of them", want, strings.Join(seen, ", "))
}

// tarLayer reports whether a media type is a tar or tar+gzip layer.
func tarLayer(mt types.MediaType) bool {
	s := string(mt)
	return strings.HasSuffix(s, "tar+gzip") || strings.HasSuffix(s, ".tar") || strings.HasSuffix(s, "tar.gzip") ||
		strings.HasSuffix(s, "tar.gz") || mt == types.DockerLayer || mt == types.DockerUncompressedLayer ||
		mt == types.OCILayer || mt == types.OCIUncompressedLayer
}

// Pull downloads the chosen layer, verifying its digest and size while
// reading, and extracts it with artifact.Untar into dst, which must not
// exist or be empty. It extracts into a temporary sibling first and
// renames it to dst only when the whole layer verified: a refused layer
// leaves nothing behind.
func (c *Client) Pull(ctx context.Context, ref Reference, dst string, opts PullOptions) (Pulled, error) {
	ro := c.session(ctx)
	m, dgst, err := c.manifest(ref, ro)
	if err != nil {
		return Pulled{}, err
	}
	layer, err := chooseLayer(m, opts.LayerMediaType)
	if err != nil {
		return Pulled{}, fmt.Errorf("%s: %w", ref, err)
	}
	if !tarLayer(layer.MediaType) {
		return Pulled{}, fmt.Errorf("%s: layer %s has media type %s, which is not a tar or tar+gzip archive", ref, layer.Digest, layer.MediaType)
	}
	if opts.MaxSize > 0 && layer.Size > opts.MaxSize {
		return Pulled{}, &LimitError{Layer: layer.Digest.String(), Size: layer.Size, Max: opts.MaxSize}
	}
	if err := checkEmptyDst(dst); err != nil {
		return Pulled{}, err
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dst)), 0o755); err != nil {
		return Pulled{}, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dst)), ".pull-*")
	if err != nil {
		return Pulled{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	err = c.readLayer(ref, layer, opts.MaxSize, ro, func(r io.Reader) error {
		return artifact.Untar(r, tmp, artifact.Limits{MaxBytes: opts.MaxExtractedSize})
	})
	if err != nil {
		return Pulled{}, err
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Pulled{}, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return Pulled{}, err
	}
	return Pulled{Digest: dgst, Annotations: m.Annotations, LayerDigest: layer.Digest.String()}, nil
}

func checkEmptyDst(dst string) error {
	entries, err := os.ReadDir(dst)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("destination %s: %w", dst, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("destination %s is not empty: pull into a new or empty directory", dst)
	}
	return nil
}

// readLayer streams the layer blob to consume, then reads whatever consume
// left (tar padding, gzip trailer) so the digest covers every byte; a
// digest mismatch wins over consume's error, since it explains it.
func (c *Client) readLayer(ref Reference, layer v1.Descriptor, maxSize int64, ro []remote.Option, consume func(io.Reader) error) error {
	n, err := ref.name(c.NameOptions()...)
	if err != nil {
		return err
	}
	blob := n.Context().Digest(layer.Digest.String())
	rl, err := remote.Layer(blob, ro...)
	if err != nil {
		return c.classify(err, ref.Registry(), blob.String())
	}
	rc, err := rl.Compressed()
	if err != nil {
		return fmt.Errorf("downloading layer %s: %w", layer.Digest, c.classify(err, ref.Registry(), blob.String()))
	}
	defer rc.Close()
	vr := &verifyingReader{r: rc, h: sha256.New(), layer: layer, max: maxSize}
	cerr := consume(vr)
	if _, err := io.Copy(io.Discard, vr); err != nil && cerr == nil {
		cerr = err
	}
	if derr := vr.check(); derr != nil {
		return derr
	}
	if cerr != nil {
		return fmt.Errorf("extracting layer %s of %s: %w", layer.Digest, ref, cerr)
	}
	return nil
}

// verifyingReader hashes and counts what it reads, stops past the size
// bound or the manifest's size, and checks the digest at the end.
type verifyingReader struct {
	r     io.Reader
	h     hash.Hash
	layer v1.Descriptor
	max   int64
	n     int64
	err   error // sticky
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	// Read at most one byte past the smaller bound, so a stream that is
	// too long is caught after a bounded read whatever the chunk sizes.
	bound := v.layer.Size
	if v.max > 0 && v.max < bound {
		bound = v.max
	}
	room := bound + 1 - v.n
	if room <= 0 { // unreachable: the checks below stop the stream first
		return 0, fmt.Errorf("layer %s: read past its bound", v.layer.Digest)
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	switch {
	case v.max > 0 && v.n > v.max:
		v.err = &LimitError{Layer: v.layer.Digest.String(), Size: v.n, Max: v.max}
	case v.n > v.layer.Size:
		v.err = &DigestError{Layer: v.layer.Digest.String(), Got: fmt.Sprintf("unknown: the blob is larger than the %d bytes the manifest announces", v.layer.Size)}
	case err != nil && !errors.Is(err, io.EOF):
		// go-containerregistry verifies too; say which layer failed.
		v.err = fmt.Errorf("reading layer %s: %w", v.layer.Digest, err)
	default:
		return n, err
	}
	return 0, v.err
}

// check reports a size or digest mismatch once the stream is drained.
func (v *verifyingReader) check() error {
	var le *LimitError
	var de *DigestError
	if errors.As(v.err, &le) || errors.As(v.err, &de) {
		return v.err
	}
	got := "sha256:" + hex.EncodeToString(v.h.Sum(nil))
	if got != v.layer.Digest.String() || v.n != v.layer.Size {
		return &DigestError{Layer: v.layer.Digest.String(), Got: got}
	}
	return v.err
}
