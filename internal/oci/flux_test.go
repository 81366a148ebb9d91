package oci

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestReadsWhatFluxWrites pushes with Flux's own client (as `flux push
// artifact` does) and reads it back here.
func TestReadsWhatFluxWrites(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	dir := program(t)
	writeTree(t, dir, map[string]string{"logo.png": "ignored by Flux's defaults"})
	r := ref(reg, "flux/app:v1")
	dgst := testenv.PushFluxArtifact(t, ctx, r.String(), dir, "https://example.com/app.git", "main@sha1:123")

	m, got, err := c.Manifest(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if got != dgst || string(m.Config.MediaType) != ConfigMediaType || string(m.Layers[0].MediaType) != ContentMediaType {
		t.Fatalf("manifest %s %+v", got, m)
	}
	dst := filepath.Join(t.TempDir(), "out")
	pulled, err := c.Pull(ctx, r, dst, PullOptions{MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Digest != dgst || pulled.Annotations[AnnotationRevision] != "main@sha1:123" || pulled.Annotations[AnnotationSource] != "https://example.com/app.git" {
		t.Errorf("Pulled = %+v", pulled)
	}
	if readFile(t, filepath.Join(dst, "resources/cm.yaml")) != "kind: ConfigMap\n" {
		t.Error("content differs")
	}
	if _, err := os.Stat(filepath.Join(dst, "logo.png")); !os.IsNotExist(err) {
		t.Errorf("logo.png: %v", err)
	}
	list, err := c.List(ctx, r.Repository)
	if err != nil || len(list) != 1 || list[0].Revision != "main@sha1:123" || list[0].Digest != dgst {
		t.Errorf("List = %+v, %v", list, err)
	}
	// Flux keeps real modes and times; Diff compares content and the exec
	// bit only, so the same folder shows no change.
	if changes, err := c.Diff(ctx, r, dir, BuildOptions{}); err != nil || len(changes) != 0 {
		t.Errorf("Diff = %v, %v", changes, err)
	}
}

// TestFluxReadsWhatWeWrite pushes here and pulls with Flux's own client.
func TestFluxReadsWhatWeWrite(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	dir := program(t)
	r := ref(reg, "ours/app:v1")
	dgst, err := c.Push(ctx, r, dir, PushOptions{Source: "https://example.com/app.git", Revision: "v1@sha1:456"})
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if rev := testenv.PullFluxArtifact(t, ctx, r.Repository+"@"+dgst, dst); rev != "v1@sha1:456" {
		t.Errorf("Flux read revision %q", rev)
	}
	var files []string
	_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if want := []string{"Pulumi.yaml", "resources/cm.yaml", "scripts/run.sh"}; !slices.Equal(files, want) {
		t.Errorf("Flux extracted %v, want %v", files, want)
	}
}

// TestConfigMatchesFlux: the config blob is the one Flux writes (go-
// containerregistry's empty image config with created set), byte for byte
// once the creation times are aligned.
func TestConfigMatchesFlux(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	dir := program(t)
	fluxRef := ref(reg, "flux/app:v1")
	testenv.PushFluxArtifact(t, ctx, fluxRef.String(), dir, "s", "r")
	fm, _, err := c.Manifest(ctx, fluxRef)
	if err != nil {
		t.Fatal(err)
	}
	created, err := time.Parse(time.RFC3339, fm.Annotations[AnnotationCreated])
	if err != nil {
		t.Fatal(err)
	}
	ours := ref(reg, "ours/app:v1")
	if _, err := c.Push(ctx, ours, dir, PushOptions{Source: "s", Revision: "r", Created: created}); err != nil {
		t.Fatal(err)
	}
	om, _, err := c.Manifest(ctx, ours)
	if err != nil {
		t.Fatal(err)
	}
	if fm.Config.Digest != om.Config.Digest || fm.Config.MediaType != om.Config.MediaType {
		t.Errorf("config %s (%s), Flux's %s (%s)", om.Config.Digest, om.Config.MediaType, fm.Config.Digest, fm.Config.MediaType)
	}
	if !maps.Equal(fm.Annotations, om.Annotations) || fm.MediaType != om.MediaType {
		t.Errorf("manifest annotations %v / %s, Flux's %v / %s", om.Annotations, om.MediaType, fm.Annotations, fm.MediaType)
	}
}
