package oci

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

func TestTagAndList(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	dir := program(t)
	d1, err := c.Push(ctx, ref(reg, "demo/app:v1"), dir, PushOptions{Source: "https://x/app.git", Revision: "v1@sha1:aaa", Created: time.Unix(100, 0)})
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"Pulumi.yaml": "name: demo2\nruntime: yaml\n"})
	d2, err := c.Push(ctx, ref(reg, "demo/app:v2"), dir, PushOptions{Revision: "v2@sha1:bbb"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Tag(ctx, ref(reg, "demo/app:v2"), "latest"); err != nil {
		t.Fatal(err)
	}
	if err := c.Tag(ctx, ref(reg, "demo/app:v2"), "-bad"); err == nil || !strings.Contains(err.Error(), "invalid tag") {
		t.Errorf("bad tag: err = %v", err)
	}
	// A cosign-style signature tag is not an artifact.
	pushRawLayer(t, reg, "demo/app:sha256-"+strings.TrimPrefix(d1, "sha256:")+".sig", "application/vnd.dev.cosign.simplesigning.v1+json", []byte("{}"), 0)

	tags, err := c.ListTags(ctx, reg.Host()+"/demo/app")
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 4 {
		t.Errorf("ListTags = %v, want 4 tags", tags)
	}
	list, err := c.List(ctx, reg.Host()+"/demo/app")
	if err != nil {
		t.Fatal(err)
	}
	want := []TagInfo{
		{Tag: "latest", Digest: d2, Revision: "v2@sha1:bbb", Created: "1970-01-01T00:00:00Z"},
		{Tag: "v1", Digest: d1, Source: "https://x/app.git", Revision: "v1@sha1:aaa", Created: "1970-01-01T00:01:40Z"},
		{Tag: "v2", Digest: d2, Revision: "v2@sha1:bbb", Created: "1970-01-01T00:00:00Z"},
	}
	if !slices.Equal(list, want) {
		t.Errorf("List =\n%+v\nwant\n%+v", list, want)
	}
	if n := reg.TagListings("demo/app"); n != 2 {
		t.Errorf("%d tag listings, want 2", n)
	}
}

func TestDiff(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	dir := program(t)
	writeTree(t, dir, map[string]string{"gone.txt": "g", "build/x": "ignored"})
	r := ref(reg, "demo/app:v1")
	opts := BuildOptions{IgnorePaths: []string{"build/"}}
	if _, err := c.Push(ctx, r, dir, PushOptions{IgnorePaths: opts.IgnorePaths}); err != nil {
		t.Fatal(err)
	}
	if changes, err := c.Diff(ctx, r, dir, opts); err != nil || len(changes) != 0 {
		t.Fatalf("unchanged folder: %v, %v", changes, err)
	}
	// Times do not count; content, exec bit and new/removed files do.
	future := time.Now().Add(time.Hour)
	_ = os.Chtimes(filepath.Join(dir, "Pulumi.yaml"), future, future)
	writeTree(t, dir, map[string]string{"resources/cm.yaml": "kind: Secret\n", "new.yaml": "n", "build/y": "still ignored"})
	_ = os.Remove(filepath.Join(dir, "gone.txt"))
	_ = os.Chmod(filepath.Join(dir, "scripts/run.sh"), 0o644)
	changes, err := c.Diff(ctx, r, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []FileChange{
		{Path: "gone.txt", Change: "removed"},
		{Path: "new.yaml", Change: "added"},
		{Path: "resources/cm.yaml", Change: "modified"},
		{Path: "scripts/run.sh", Change: "modified"},
	}
	if !slices.Equal(changes, want) {
		t.Errorf("Diff =\n%v\nwant\n%v", changes, want)
	}
}

// TestOneSessionPerOperation: the requests of one operation share one
// ping and authentication (go-containerregistry pings /v2/ per new
// transport), so pulling is ping + manifest + blob and listing N tags is
// ping + tag list + N manifests.
func TestOneSessionPerOperation(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t, testenv.WithRegistryBasicAuth("u", "p"))
	creds, _ := CredentialsFromUserPass("u:p")
	c := &Client{Insecure: true, Credentials: creds}
	for _, tag := range []string{"v1", "v2", "v3"} {
		if _, err := c.Push(ctx, ref(reg, "a/b:"+tag), program(t), PushOptions{Revision: tag}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(what string, want int64, op func() error) {
		t.Helper()
		n := reg.Requests()
		if err := op(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := reg.Requests() - n; got != want {
			t.Errorf("%s made %d requests, want %d", what, got, want)
		}
	}
	count("Pull", 3, func() error {
		_, err := c.Pull(ctx, ref(reg, "a/b:v1"), filepath.Join(t.TempDir(), "o"), PullOptions{})
		return err
	})
	count("List", 5, func() error { _, err := c.List(ctx, reg.Host()+"/a/b"); return err })
	count("Digest", 2, func() error { _, err := c.Digest(ctx, ref(reg, "a/b:v1")); return err })
}
