package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/oci/cosign"
)

// TestSourceControllerVerifiesOurSignatures is the proof that our signatures are "verifiable
// by Flux's OCIRepository verify.provider: cosign": the real source-controller, given our
// cosign.pub, marks artifacts we signed SourceVerified=True and Ready, in each format alone,
// with and without the referrers API, and refuses an unsigned artifact and one signed with
// another key.
func TestSourceControllerVerifiesOurSignatures(t *testing.T) {
	t.Parallel() // its own control plane
	env, err := Start(Options{FluxCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	sc := env.StartSourceController(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	key := newSigner(t, "pw")
	other := newSigner(t, "other")
	if err := env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cosign-pub", Namespace: ns},
		Data:       map[string][]byte{"cosign.pub": key.PublicKey().PEM()},
	}); err != nil {
		t.Fatal(err)
	}

	type want struct {
		name     string
		signer   *cosign.Signer // nil: unsigned
		opts     cosign.SignOptions
		verified bool
	}
	cases := []want{
		{"bundle", key, cosign.SignOptions{Bundle: true}, true},
		{"legacy", key, cosign.SignOptions{Legacy: true}, true},
		{"both", key, cosign.SignOptions{Bundle: true, Legacy: true}, true},
		{"other-key", other, cosign.SignOptions{Bundle: true, Legacy: true}, false},
		{"unsigned", nil, cosign.SignOptions{}, false},
	}
	var objs []*unstructured.Unstructured
	var expect []want
	for _, referrers := range []bool{true, false} {
		host := startRegistry(t, referrers)
		for _, c := range cases {
			repo := host + "/" + c.name
			digest := pushFluxArtifact(t, repo, "v1", c.name)
			if c.signer != nil {
				if err := cosign.Sign(ctx, repo, digest, c.signer, c.opts, nil); err != nil {
					t.Fatal(err)
				}
			}
			o := ociRepository(ns, fmt.Sprintf("%s-%t", c.name, referrers), "oci://"+repo, "v1", "cosign-pub")
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			objs, expect = append(objs, o), append(expect, c)
		}
	}

	deadline := time.Now().Add(45 * time.Second)
	for i, o := range objs {
		c := expect[i]
		for {
			ready, verified := conditions(t, env.Client, o)
			done := verified.status != "" && ready.status != "" && ready.status != "Unknown"
			if done {
				wantStatus := map[bool]string{true: "True", false: "False"}[c.verified]
				if verified.status != wantStatus || ready.status != wantStatus {
					t.Errorf("%s: SourceVerified=%s (%s: %s), Ready=%s (%s: %s); want both %s",
						o.GetName(), verified.status, verified.reason, verified.message, ready.status, ready.reason, ready.message, wantStatus)
				} else {
					t.Logf("%s: SourceVerified=%s %s: %s", o.GetName(), verified.status, verified.reason, verified.message)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no verification result in 45s (Ready=%+v, SourceVerified=%+v); source-controller log:\n%s", o.GetName(), ready, verified, sc.Logs(40))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

func newSigner(t *testing.T, password string) *cosign.Signer {
	t.Helper()
	priv, _, err := cosign.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cosign.LoadSigner(priv, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startRegistry is go-containerregistry's in-memory registry on loopback, plain HTTP.
func startRegistry(t *testing.T, referrers bool) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrers), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushFluxArtifact pushes a one-file artifact in Flux's format (OCI manifest, Flux config
// and content media types) and returns its digest.
func pushFluxArtifact(t *testing.T, repo, tag, content string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	body := []byte("name: " + content + "\nruntime: yaml\n")
	if err := tw.WriteHeader(&tar.Header{Name: "Pulumi.yaml", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, "application/vnd.cncf.flux.config.v1+json")
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(buf.Bytes(), "application/vnd.cncf.flux.content.v1.tar+gzip")})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func ociRepository(ns, name, url, tag, keySecret string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "OCIRepository",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"url":      url,
			"ref":      map[string]any{"tag": tag},
			"interval": "10m",
			"insecure": true,
			"verify":   map[string]any{"provider": "cosign", "secretRef": map[string]any{"name": keySecret}},
		},
	}}
	return o
}

type condition struct{ status, reason, message string }

func conditions(t *testing.T, c client.Client, o *unstructured.Unstructured) (ready, verified condition) {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), got); err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		cd := condition{fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])}
		switch m["type"] {
		case "Ready":
			ready = cd
		case "SourceVerified":
			verified = cd
		}
	}
	return ready, verified
}
