package oci

import (
	"context"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

func imageWith(t *testing.T, file string) v1.Image {
	t.Helper()
	layer := static.NewLayer(tarGz(t, []tarEntry{{name: "Pulumi.yaml", body: []byte(file)}}), types.OCILayer)
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestPullFromImageIndex reads a program from what `docker buildx build
// --push` writes: an index with per-platform images and an attestation.
func TestPullFromImageIndex(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: imageWith(t, "name: other\n"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}},
		mutate.IndexAddendum{Add: imageWith(t, "name: mine\n"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}}},
		mutate.IndexAddendum{Add: imageWith(t, "attestation"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}},
	)
	r := ref(reg, "baked/app:v1")
	n, _ := name.ParseReference(r.String(), name.Insecure)
	if err := remote.WriteIndex(n, idx); err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	dst := filepath.Join(t.TempDir(), "out")
	pulled, err := c.Pull(ctx, r, dst, PullOptions{LayerMediaType: string(types.OCILayer)})
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Digest != want.String() {
		t.Errorf("digest %s, want the index's %s", pulled.Digest, want)
	}
	if got := readFile(t, filepath.Join(dst, "Pulumi.yaml")); got != "name: mine\n" {
		t.Errorf("took %q, want this platform's image", got)
	}

	// Without an image for this platform and more than one: an error
	// listing what there is.
	idx2 := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: imageWith(t, "a"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "plan9", Architecture: "386"}}},
		mutate.IndexAddendum{Add: imageWith(t, "b"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "plan9", Architecture: "arm"}}},
	)
	n2, _ := name.ParseReference(reg.Host()+"/baked/multi:v1", name.Insecure)
	if err := remote.WriteIndex(n2, idx2); err != nil {
		t.Fatal(err)
	}
	_, err = c.Pull(ctx, ref(reg, "baked/multi:v1"), filepath.Join(t.TempDir(), "o"), PullOptions{LayerMediaType: string(types.OCILayer)})
	if err == nil || !strings.Contains(err.Error(), "plan9/386, plan9/arm") {
		t.Fatalf("err = %v", err)
	}
}

// noHead answers 405 to HEAD requests, as some registries and proxies do.
type noHead struct{ heads, gets atomic.Int32 }

func (n *noHead) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/manifests/") {
		if req.Method == http.MethodHead {
			n.heads.Add(1)
			return &http.Response{StatusCode: http.StatusMethodNotAllowed, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
		}
		n.gets.Add(1)
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestDigestFallsBackToGet(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	r := ref(reg, "demo/app:v1")
	dgst, err := newTestClient(reg).Push(ctx, r, program(t), PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt := &noHead{}
	c := &Client{Insecure: true, Transport: rt}
	got, err := c.Digest(ctx, r)
	if err != nil || got != dgst {
		t.Fatalf("Digest = %s, %v; want %s", got, err, dgst)
	}
	if rt.heads.Load() != 1 || rt.gets.Load() != 1 {
		t.Errorf("%d HEAD, %d GET; want 1 each", rt.heads.Load(), rt.gets.Load())
	}
}
