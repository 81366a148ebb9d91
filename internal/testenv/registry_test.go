package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// pushOne writes a one-layer image to host/repo:tag and returns the layer
// digest and its bytes.
func pushOne(t *testing.T, ref string, auth authn.Authenticator) (string, []byte) {
	t.Helper()
	content := []byte(strings.Repeat("layer bytes ", 100))
	layer := static.NewLayer(content, types.OCILayer)
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	n, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(n, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	d, _ := layer.Digest()
	return d.String(), content
}

func get(t *testing.T, method, url string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestRegistryCountsAndTampers(t *testing.T) {
	reg := NewRegistry(t)
	if !strings.HasPrefix(reg.Host(), "127.0.0.1:") {
		t.Fatalf("Host = %q", reg.Host())
	}
	layer, content := pushOne(t, reg.Host()+"/a/b:v1", authn.Anonymous)
	base := "http://" + reg.Host() + "/v2/a/b"
	before, v1Before := reg.Requests(), reg.TagLookups("a/b", "v1") // the push looked the tag up too
	get(t, http.MethodHead, base+"/manifests/v1")
	get(t, http.MethodGet, base+"/manifests/v1")
	get(t, http.MethodGet, base+"/manifests/v2")
	get(t, http.MethodGet, base+"/tags/list")
	if n := reg.Requests() - before; n != 4 {
		t.Errorf("Requests grew by %d, want 4", n)
	}
	if reg.TagLookups("a/b", "v1")-v1Before != 2 || reg.TagLookups("a/b", "v2") != 1 || reg.TagListings("a/b") != 1 {
		t.Errorf("lookups v1=%d v2=%d listings=%d", reg.TagLookups("a/b", "v1"), reg.TagLookups("a/b", "v2"), reg.TagListings("a/b"))
	}

	reg.TamperBlob(layer)
	_, tampered := get(t, http.MethodGet, base+"/blobs/"+layer)
	if len(tampered) != len(content) || bytes.Equal(tampered, content) {
		t.Errorf("tampered blob: %d bytes (want %d), equal=%v", len(tampered), len(content), bytes.Equal(tampered, content))
	}
	if _, again := get(t, http.MethodGet, base+"/blobs/"+layer); !bytes.Equal(again, content) {
		t.Error("tampering is not limited to the next GET")
	}
}

func TestRegistryBasicAuth(t *testing.T) {
	reg := NewRegistry(t, WithRegistryBasicAuth("u", "p"))
	resp, _ := get(t, http.MethodGet, "http://"+reg.Host()+"/v2/")
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("anonymous: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	pushOne(t, reg.Host()+"/a/b:v1", &authn.Basic{Username: "u", Password: "p"})
	n, _ := name.ParseReference(reg.Host()+"/a/b:v1", name.Insecure)
	if _, err := remote.Head(n, remote.WithAuth(&authn.Basic{Username: "u", Password: "wrong"})); err == nil {
		t.Error("wrong password accepted")
	}
}

func TestRegistryReferrers(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			reg := NewRegistry(t, WithReferrers(on))
			pushOne(t, reg.Host()+"/a/b:v1", authn.Anonymous)
			n, _ := name.ParseReference(reg.Host()+"/a/b:v1", name.Insecure)
			desc, err := remote.Head(n)
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := get(t, http.MethodGet, "http://"+reg.Host()+"/v2/a/b/referrers/"+desc.Digest.String())
			if got := resp.StatusCode == http.StatusOK; got != on {
				t.Errorf("referrers API answered %d with support %v", resp.StatusCode, on)
			}
		})
	}
}
