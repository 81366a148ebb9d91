package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

type tarEntry struct {
	name   string
	body   []byte
	dir    bool
	link   string
	hard   string // hard link target
	device bool
}

func writeEntries(t *testing.T, w io.Writer, entries []tarEntry) {
	t.Helper()
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		case e.hard != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.hard, 0
		case e.device:
			h.Typeflag, h.Devmajor, h.Devminor, h.Size = tar.TypeChar, 1, 3, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func tarGz(t *testing.T, entries []tarEntry) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	writeEntries(t, zw, entries)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func plainTar(t *testing.T, entries []tarEntry) []byte {
	var buf bytes.Buffer
	writeEntries(t, &buf, entries)
	return buf.Bytes()
}

func randomish(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// pushRawLayer pushes an image with one layer of these bytes and media
// type, written by go-containerregistry directly (not by Push). A
// claimedSize > 0 replaces the layer's size in the manifest, as a lying
// manifest would.
func pushRawLayer(t *testing.T, reg *testenv.Registry, repoTag, mediaType string, content []byte, claimedSize int64) Reference {
	t.Helper()
	r := ref(reg, repoTag)
	layer := static.NewLayer(content, types.MediaType(mediaType))
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	n, err := name.ParseReference(r.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if claimedSize == 0 {
		if err := remote.Write(n, img, remote.WithTransport(remote.DefaultTransport)); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Upload the blob, then a hand-edited manifest.
	if err := remote.WriteLayer(n.Context(), layer); err != nil {
		t.Fatal(err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteLayer(n.Context(), static.NewLayer(cfg, types.OCIConfigJSON)); err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	m = m.DeepCopy()
	m.Layers[0].Size = claimedSize
	raw, err := jsonMarshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(n, rawManifest{raw: raw}); err != nil {
		t.Fatal(err)
	}
	return r
}

type rawManifest struct{ raw []byte }

func (m rawManifest) RawManifest() ([]byte, error) { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) {
	return types.OCIManifestSchema1, nil
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
