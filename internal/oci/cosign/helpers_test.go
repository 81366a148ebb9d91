package cosign

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// registryModes are the two kinds of registry signatures must work with: one with the OCI 1.1
// referrers API, one where referrers live under the referrers tag schema (sha256-HEX).
var registryModes = []struct {
	name      string
	referrers bool
}{{"referrers-api", true}, {"referrers-tag", false}}

// newRegistry starts go-containerregistry's in-memory registry on loopback (plain HTTP) and
// returns its host.
func newRegistry(t *testing.T, referrers bool) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrers), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushRandom pushes a small random image to host/repo:tag and returns its manifest digest.
func pushRandom(t *testing.T, repository, tag string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(repository + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remoteOpts()...); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func remoteOpts() []remote.Option { return []remote.Option{remote.WithContext(context.Background())} }

type testKey struct {
	priv, pub []byte
	signer    *Signer
	keys      []PublicKey
}

func newTestKey(t *testing.T, password string) testKey {
	t.Helper()
	priv, pub, err := GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(priv, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadPublicKeys(pub)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv: priv, pub: pub, signer: s, keys: keys}
}
