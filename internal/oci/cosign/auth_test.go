package cosign

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestCallerControlsAuth: Sign and Verify use the caller's remote options (here basic auth)
// and nothing else, and a registry that refuses the request is a registry error, not a
// *VerificationError: an artifact that cannot be read is not "unsigned".
func TestCallerControlsAuth(t *testing.T) {
	ctx := context.Background()
	for _, mode := range registryModes {
		t.Run(mode.name, func(t *testing.T) {
			h := registry.New(registry.WithReferrersSupport(mode.referrers), registry.Logger(log.New(io.Discard, "", 0)))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, p, ok := r.BasicAuth(); !ok || u != "ci" || p != "s3cret" {
					w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
					http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			repo := strings.TrimPrefix(srv.URL, "http://") + "/app"
			auth := []remote.Option{remote.WithAuth(&authn.Basic{Username: "ci", Password: "s3cret"})}

			img, err := random.Image(128, 1)
			if err != nil {
				t.Fatal(err)
			}
			tag, _ := name.NewTag(repo + ":v1")
			if err := remote.Write(tag, img, auth...); err != nil {
				t.Fatal(err)
			}
			d, _ := img.Digest()
			digest := d.String()
			k := newTestKey(t, "")

			if err := Sign(ctx, repo, digest, k.signer, SignOptions{Bundle: true, Legacy: true}, nil); err == nil {
				t.Fatal("Sign without credentials succeeded")
			}
			if err := Sign(ctx, repo, digest, k.signer, SignOptions{Bundle: true, Legacy: true}, auth); err != nil {
				t.Fatal(err)
			}
			if got, err := Verify(ctx, repo, digest, k.keys, auth); err != nil || got.Format != FormatBundle {
				t.Fatalf("Verify with credentials = %+v, %v", got, err)
			}
			_, err = Verify(ctx, repo, digest, k.keys, nil)
			var ve *VerificationError
			if err == nil || errors.As(err, &ve) {
				t.Fatalf("Verify without credentials = %v (%T): want the registry's 401, not a verification failure", err, err)
			}
			if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
				t.Errorf("Verify without credentials: %v: want it to say the registry refused", err)
			}
		})
	}
}
