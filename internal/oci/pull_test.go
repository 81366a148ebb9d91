package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

func TestPushPullRoundTrip(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	r := ref(reg, "demo/app:v1")
	created := time.Date(2026, 11, 30, 8, 0, 0, 0, time.FixedZone("X", 3600))
	dgst, err := c.Push(ctx, r, program(t), PushOptions{
		Source: "https://example.com/app.git", Revision: "main@sha1:abc", Created: created,
		Annotations: map[string]string{"com.example/team": "infra"},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, mdgst, err := c.Manifest(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if mdgst != dgst {
		t.Fatalf("manifest digest %s, push said %s", mdgst, dgst)
	}
	if string(m.MediaType) != ManifestMediaType || string(m.Config.MediaType) != ConfigMediaType ||
		len(m.Layers) != 1 || string(m.Layers[0].MediaType) != ContentMediaType {
		t.Fatalf("not Flux's format: %+v", m)
	}
	want := map[string]string{
		AnnotationSource: "https://example.com/app.git", AnnotationRevision: "main@sha1:abc",
		AnnotationCreated: "2026-11-30T07:00:00Z", "com.example/team": "infra",
	}
	for k, v := range want {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}

	dst := filepath.Join(t.TempDir(), "out")
	pulled, err := c.Pull(ctx, Reference{Repository: r.Repository, Digest: dgst}, dst, PullOptions{MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Digest != dgst || pulled.LayerDigest != m.Layers[0].Digest.String() || pulled.Annotations[AnnotationRevision] != "main@sha1:abc" {
		t.Errorf("Pulled = %+v", pulled)
	}
	if got := readFile(t, filepath.Join(dst, "Pulumi.yaml")); got != "name: demo\nruntime: yaml\n" {
		t.Errorf("Pulumi.yaml = %q", got)
	}
	fi, err := os.Stat(filepath.Join(dst, "scripts/run.sh"))
	if err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("run.sh lost its exec bit: %v %v", fi, err)
	}

	// Digest resolves the tag with one request to the manifest.
	before := reg.TagLookups("demo/app", "v1")
	if got, err := c.Digest(ctx, r); err != nil || got != dgst {
		t.Fatalf("Digest = %s, %v; want %s", got, err, dgst)
	}
	if n := reg.TagLookups("demo/app", "v1") - before; n != 1 {
		t.Errorf("Digest made %d tag lookups, want 1", n)
	}
}

func TestPushDefaultsCreatedToEpoch(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	r := ref(reg, "demo/app:v1")
	if _, err := c.Push(ctx, r, program(t), PushOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _, err := c.Manifest(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Annotations[AnnotationCreated]; got != "1970-01-01T00:00:00Z" {
		t.Errorf("created = %q", got)
	}
}

func TestPullRefusesLayerOverTheBoundBeforeDownload(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	r := ref(reg, "demo/app:v1")
	if _, err := c.Push(ctx, r, program(t), PushOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _, err := c.Manifest(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	layer := m.Layers[0]
	before := reg.Requests()
	dst := filepath.Join(t.TempDir(), "out")
	_, err = c.Pull(ctx, r, dst, PullOptions{MaxSize: layer.Size - 1})
	var le *LimitError
	if !errors.As(err, &le) || le.Layer != layer.Digest.String() || le.Max != layer.Size-1 {
		t.Fatalf("err = %v, want a *LimitError for %s", err, layer.Digest)
	}
	// Only the manifest was fetched (ping + manifest GET): no blob GET.
	if n := reg.Requests() - before; n > 2 {
		t.Errorf("%d requests, want the manifest only", n)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dst exists after a refused pull: %v", err)
	}
}

func TestPullStopsReadingPastTheManifestSize(t *testing.T) {
	// A manifest that understates the layer's size passes the check
	// before download; the reader must stop right after that size.
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	layer := tarGz(t, []tarEntry{{name: "big", body: randomish(64 << 10)}})
	r := pushRawLayer(t, reg, "demo/lying:v1", ContentMediaType, layer, 100)
	dst := filepath.Join(t.TempDir(), "out")
	_, err := c.Pull(ctx, r, dst, PullOptions{MaxSize: 1000})
	var de *DigestError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "larger than the 100 bytes") {
		t.Fatalf("err = %v, want a *DigestError for a blob larger than its manifest says", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dst exists after a refused pull: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".pull-*"))
	if len(leftovers) > 0 {
		t.Errorf("temp dirs left: %v", leftovers)
	}
}

func TestVerifyingReaderStopsAtTheBound(t *testing.T) {
	// The bound holds while reading even if the manifest check were
	// skipped: at most one byte past it is read.
	src := &countingReader{r: bytes.NewReader(randomish(1 << 20))}
	layer := v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}, Size: 1 << 20}
	vr := &verifyingReader{r: src, h: sha256.New(), layer: layer, max: 1000}
	_, err := io.Copy(io.Discard, vr)
	var le *LimitError
	if !errors.As(err, &le) || le.Max != 1000 {
		t.Fatalf("err = %v, want a *LimitError", err)
	}
	if src.n != 1001 {
		t.Errorf("read %d bytes, want 1001", src.n)
	}
	if err := vr.check(); !errors.As(err, &le) {
		t.Errorf("check() = %v, want the *LimitError", err)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestPullRefusesTamperedLayer(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	r := ref(reg, "demo/app:v1")
	if _, err := c.Push(ctx, r, program(t), PushOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _, err := c.Manifest(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	layer := m.Layers[0].Digest.String()
	reg.TamperBlob(layer)
	dst := filepath.Join(t.TempDir(), "out")
	_, err = c.Pull(ctx, r, dst, PullOptions{})
	var de *DigestError
	if !errors.As(err, &de) || de.Layer != layer || !strings.Contains(err.Error(), layer) {
		t.Fatalf("err = %v, want a *DigestError naming %s", err, layer)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dst exists after a refused pull: %v", err)
	}
	// The untampered blob still pulls.
	if _, err := c.Pull(ctx, r, dst, PullOptions{}); err != nil {
		t.Fatalf("second pull: %v", err)
	}
}

func TestPullSelectsLayerByMediaType(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	for _, mt := range []string{"application/vnd.oci.image.layer.v1.tar+gzip", "application/vnd.docker.image.rootfs.diff.tar.gzip", "application/vnd.oci.image.layer.v1.tar"} {
		t.Run(mt, func(t *testing.T) {
			layer := tarGz(t, []tarEntry{{name: "app/", dir: true}, {name: "app/Pulumi.yaml", body: []byte("name: baked\n")}})
			if !strings.HasSuffix(mt, "gzip") {
				layer = plainTar(t, []tarEntry{{name: "app/Pulumi.yaml", body: []byte("name: baked\n")}})
			}
			r := pushRawLayer(t, reg, "demo/image:"+strings.NewReplacer("/", "-", "+", "-").Replace(mt[12:]), mt, layer, 0)
			dst := filepath.Join(t.TempDir(), "out")
			if _, err := c.Pull(ctx, r, dst, PullOptions{}); err == nil || !strings.Contains(err.Error(), "no layer of media type "+ContentMediaType) {
				t.Fatalf("default selection: err = %v, want it to say no Flux layer", err)
			}
			if _, err := c.Pull(ctx, r, dst, PullOptions{LayerMediaType: mt}); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(dst, "app/Pulumi.yaml")); got != "name: baked\n" {
				t.Errorf("got %q", got)
			}
		})
	}
}

func TestPullRefusesUnsafeArchives(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		entry   string
	}{
		{"dotdot", []tarEntry{{name: "ok.txt", body: []byte("x")}, {name: "../evil.txt", body: []byte("x")}}, "../evil.txt"},
		{"absolute", []tarEntry{{name: "/etc/evil", body: []byte("x")}}, "/etc/evil"},
		{"link-out", []tarEntry{{name: "escape", link: "../../outside"}}, "escape"},
		{"link-abs", []tarEntry{{name: "passwd", link: "/etc/passwd"}}, "passwd"},
		{"device", []tarEntry{{name: "null", device: true}}, "null"},
		{"hardlink-out", []tarEntry{{name: "shadow", hard: "../../etc/shadow"}}, "shadow"},
		{"write-through-link", []tarEntry{{name: "dir", link: "."}, {name: "dir/x", body: []byte("x")}}, "dir/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pushRawLayer(t, reg, "demo/unsafe:"+tc.name, ContentMediaType, tarGz(t, tc.entries), 0)
			dst := filepath.Join(t.TempDir(), "out")
			_, err := c.Pull(ctx, r, dst, PullOptions{})
			if err == nil || !strings.Contains(err.Error(), `"`+tc.entry+`"`) {
				t.Fatalf("err = %v, want it to name %q", err, tc.entry)
			}
			if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("dst exists after a refused pull: %v", err)
			}
		})
	}
}

func TestPullRefusesNonEmptyDestination(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	r := ref(reg, "demo/app:v1")
	if _, err := c.Push(ctx, r, program(t), PushOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	writeTree(t, dst, map[string]string{"keep": "me"})
	m, _, err := c.Manifest(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	before := reg.Requests()
	if _, err := c.Pull(ctx, r, dst, PullOptions{}); err == nil || !strings.Contains(err.Error(), "pull into a new or empty directory") {
		t.Fatalf("err = %v", err)
	}
	// Refused before the download: ping and manifest only.
	if n := reg.Requests() - before; n > 2 {
		t.Errorf("%d requests, want no blob download for layer %s", n, m.Layers[0].Digest)
	}
	if readFile(t, filepath.Join(dst, "keep")) != "me" {
		t.Error("dst changed")
	}
	empty := t.TempDir()
	if _, err := c.Pull(ctx, r, empty, PullOptions{}); err != nil {
		t.Fatalf("pull into an empty dir: %v", err)
	}
}
