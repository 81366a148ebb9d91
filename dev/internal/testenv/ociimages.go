package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Artifacts that `stackpilot artifact push` would never write, for tests of
// what the controller accepts and refuses: an image built the Docker way,
// and hand-made archives.

// ImageLayerMediaType is the layer type of an OCI image (what a Dockerfile
// build pushes).
const ImageLayerMediaType = "application/vnd.oci.image.layer.v1.tar+gzip"

// TarEntry is one entry of a hand-made archive: a file with Body, or a
// symbolic (Symlink) or hard link to Linkname.
type TarEntry struct {
	Name, Body, Linkname string
	Symlink              bool
}

// PushRawLayer pushes an artifact in Flux's format whose one layer holds
// exactly entries, and returns the manifest digest. user may be empty.
func PushRawLayer(t TB, ctx context.Context, ref string, entries []TarEntry, user, password string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: 0o644, Size: int64(len(e.Body)), Typeflag: tar.TypeReg}
		switch {
		case e.Symlink:
			h = &tar.Header{Name: e.Name, Linkname: e.Linkname, Mode: 0o777, Typeflag: tar.TypeSymlink}
		case e.Linkname != "":
			h = &tar.Header{Name: e.Name, Linkname: e.Linkname, Mode: 0o644, Typeflag: tar.TypeLink}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar: %v", err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatalf("tar: %v", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("%v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("%v", err)
	}
	layer := static.NewLayer(buf.Bytes(), "application/vnd.cncf.flux.content.v1.tar+gzip")
	img := oneLayerImage(t, layer, "application/vnd.cncf.flux.config.v1+json")
	return writeImage(t, ctx, ref, img, user, password)
}

// PushImageLayer pushes an OCI image whose one layer (ImageLayerMediaType)
// is a tar+gzip of dir, and returns the manifest digest.
func PushImageLayer(t TB, ctx context.Context, ref, dir string) string {
	t.Helper()
	var entries []TarEntry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		entries = append(entries, TarEntry{Name: filepath.ToSlash(rel), Body: string(b)})
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.Name, Mode: 0o644, Size: int64(len(e.Body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatalf("%v", err)
		}
		if _, err := tw.Write([]byte(e.Body)); err != nil {
			t.Fatalf("%v", err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("%v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("%v", err)
	}
	img := oneLayerImage(t, static.NewLayer(buf.Bytes(), ImageLayerMediaType), string(types.OCIConfigJSON))
	return writeImage(t, ctx, ref, img, "", "")
}

// LayerDigest returns the digest of the first layer of the manifest at ref.
func LayerDigest(t TB, ctx context.Context, ref, user, password string) string {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatalf("%v", err)
	}
	img, err := remote.Image(r, remoteOpts(ctx, user, password)...)
	if err != nil {
		t.Fatalf("read %s: %v", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatalf("%v", err)
	}
	if len(m.Layers) == 0 {
		t.Fatalf("%s has no layer", ref)
	}
	return m.Layers[0].Digest.String()
}

func oneLayerImage(t TB, layer v1.Layer, configType string) v1.Image {
	t.Helper()
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return mutate.ConfigMediaType(img, types.MediaType(configType))
}

func writeImage(t TB, ctx context.Context, ref string, img v1.Image, user, password string) string {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.Write(r, img, remoteOpts(ctx, user, password)...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d.String()
}

func remoteOpts(ctx context.Context, user, password string) []remote.Option {
	opts := []remote.Option{remote.WithContext(ctx)}
	if user != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: user, Password: password}))
	}
	return opts
}
