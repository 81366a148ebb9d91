package cosign

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/toolchain"
)

// cosignCLI is the real cosign (bin/cosign, built by `make tools` from dev/tools/flux). These
// tests are the proof that our signatures are cosign's and cosign's are ours.
type cosignCLI struct {
	path string
	dir  string // keys live here
}

func requireCosign(t *testing.T) cosignCLI {
	t.Helper()
	bin, err := toolchain.BinDir()
	if err != nil {
		t.Skipf("bin/ not found (%v): build the pinned tools with `make tools`", err)
	}
	p := filepath.Join(bin, "cosign")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("bin/cosign is missing: build it with `make tools` (it is the real cosign CLI the interop tests run): %v", err)
	}
	return cosignCLI{path: p, dir: t.TempDir()}
}

// run runs cosign offline: no TUF (its cache goes to a temp HOME and nothing asks for it),
// no Rekor, no Fulcio.
func (c cosignCLI) run(t *testing.T, password string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, args...)
	cmd.Dir = c.dir
	cmd.Env = []string{
		"HOME=" + c.dir,
		"PATH=" + os.Getenv("PATH"),
		"COSIGN_PASSWORD=" + password,
		"TUF_ROOT=" + filepath.Join(c.dir, "tuf"),
		"SIGSTORE_NO_CACHE=true",
		"DOCKER_CONFIG=" + filepath.Join(c.dir, "docker"),
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (c cosignCLI) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (c cosignCLI) verify(t *testing.T, pubPath, ref string) (string, error) {
	return c.run(t, "", "verify", "--key", pubPath, "--insecure-ignore-tlog=true", "--allow-insecure-registry", ref)
}

// TestCosignVerifiesOurSignatures: what Sign writes verifies with `cosign verify --key`, each
// format on its own (cosign reads the bundle when there is one, else the .sig tag), and not
// with another key nor for an unsigned artifact.
func TestCosignVerifiesOurSignatures(t *testing.T) {
	cli := requireCosign(t)
	ctx := context.Background()
	k, other := newTestKey(t, "pw"), newTestKey(t, "other")
	pub := cli.write(t, "cosign.pub", k.pub)
	otherPub := cli.write(t, "other.pub", other.pub)
	for _, mode := range registryModes {
		for _, tc := range []struct {
			name string
			opts SignOptions
		}{
			{"both", SignOptions{Bundle: true, Legacy: true}},
			{"bundle", SignOptions{Bundle: true}},
			{"legacy", SignOptions{Legacy: true}},
		} {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				repo := newRegistry(t, mode.referrers) + "/app"
				digest := pushRandom(t, repo, "v1")
				unsigned := pushRandom(t, repo, "v2")
				if err := Sign(ctx, repo, digest, k.signer, tc.opts, remoteOpts()); err != nil {
					t.Fatal(err)
				}
				if out, err := cli.verify(t, pub, repo+"@"+digest); err != nil {
					t.Fatalf("cosign verify of our %s signature: %v\n%s", tc.name, err, out)
				}
				if out, err := cli.verify(t, otherPub, repo+"@"+digest); err == nil {
					t.Errorf("cosign verify with another key succeeded:\n%s", out)
				}
				if out, err := cli.verify(t, pub, repo+"@"+unsigned); err == nil {
					t.Errorf("cosign verify of an unsigned artifact succeeded:\n%s", out)
				}
			})
		}
	}
}

// TestWeVerifyCosignSignatures: `cosign sign --key` (v3: the bundle referrer only), offline,
// with a key from `cosign generate-key-pair`, verifies with Verify, and our LoadSigner reads
// cosign's key; another key and an unsigned artifact are rejected.
func TestWeVerifyCosignSignatures(t *testing.T) {
	cli := requireCosign(t)
	ctx := context.Background()
	const password = "cosign-pw"
	if out, err := cli.run(t, password, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	priv, err := os.ReadFile(filepath.Join(cli.dir, "cosign.key"))
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := os.ReadFile(filepath.Join(cli.dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadPublicKeys(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := LoadSigner(priv, []byte(password))
	if err != nil {
		t.Fatalf("LoadSigner(cosign generate-key-pair's cosign.key): %v", err)
	}
	if signer.PublicKey().KeyID() != keys[0].KeyID() {
		t.Fatalf("cosign.key's public half %s is not cosign.pub %s", signer.PublicKey().KeyID(), keys[0].KeyID())
	}
	other := newTestKey(t, "")

	for _, mode := range registryModes {
		t.Run(mode.name, func(t *testing.T) {
			repo := newRegistry(t, mode.referrers) + "/app"
			digest := pushRandom(t, repo, "v1")
			unsigned := pushRandom(t, repo, "v2")
			out, err := cli.run(t, password, "sign", "--key", "cosign.key", "--tlog-upload=false", "--use-signing-config=false",
				"--allow-insecure-registry", "-y", repo+"@"+digest)
			if err != nil {
				t.Fatalf("cosign sign: %v\n%s", err, out)
			}
			got, err := Verify(ctx, repo, digest, keys, remoteOpts())
			if err != nil {
				t.Fatalf("Verify of cosign's signature: %v\ncosign sign said:\n%s", err, out)
			}
			if got.Format != FormatBundle || got.KeyID != keys[0].KeyID() {
				t.Errorf("Verify = %+v, want the bundle with cosign.pub", got)
			}
			expectVerificationError(t, repo, digest, other.keys, "verifies with the given keys")
			expectVerificationError(t, repo, unsigned, keys, "no signature found")
		})
	}

	// cosign's legacy format (what cosign v2 wrote by default): the .sig tag only.
	t.Run("cosign legacy signature", func(t *testing.T) {
		repo := newRegistry(t, false) + "/app"
		digest := pushRandom(t, repo, "v1")
		out, err := cli.run(t, password, "sign", "--key", "cosign.key", "--new-bundle-format=false", "--tlog-upload=false",
			"--use-signing-config=false", "--allow-insecure-registry", "-y", repo+"@"+digest)
		if err != nil {
			t.Fatalf("cosign sign --new-bundle-format=false: %v\n%s", err, out)
		}
		got, err := Verify(ctx, repo, digest, keys, remoteOpts())
		if err != nil || got.Format != FormatLegacy {
			t.Fatalf("Verify of cosign's legacy signature = %+v, %v\ncosign sign said:\n%s", got, err, out)
		}
		expectVerificationError(t, repo, digest, other.keys, "legacy signature 1:")
	})

	// A key cosign generated signs here, and cosign verifies it.
	t.Run("our signature with cosign's key", func(t *testing.T) {
		repo := newRegistry(t, true) + "/app"
		digest := pushRandom(t, repo, "v1")
		if err := Sign(ctx, repo, digest, signer, SignOptions{Bundle: true, Legacy: true}, remoteOpts()); err != nil {
			t.Fatal(err)
		}
		if out, err := cli.verify(t, "cosign.pub", repo+"@"+digest); err != nil || !strings.Contains(out, "signatures were verified against the specified public key") {
			t.Fatalf("cosign verify: %v\n%s", err, out)
		}
	})
}

// TestCosignSignsWithOurKey: `cosign sign --key` accepts a key from GenerateKeyPair with
// COSIGN_PASSWORD, and both cosign and Verify accept the signature.
func TestCosignSignsWithOurKey(t *testing.T) {
	cli := requireCosign(t)
	k := newTestKey(t, "ours")
	cli.write(t, "ours.key", k.priv)
	pub := cli.write(t, "ours.pub", k.pub)
	repo := newRegistry(t, false) + "/app"
	digest := pushRandom(t, repo, "v1")
	if out, err := cli.run(t, "ours", "sign", "--key", "ours.key", "--tlog-upload=false", "--use-signing-config=false",
		"--allow-insecure-registry", "-y", repo+"@"+digest); err != nil {
		t.Fatalf("cosign sign --key with our key: %v\n%s", err, out)
	}
	if out, err := cli.verify(t, pub, repo+"@"+digest); err != nil {
		t.Fatalf("cosign verify: %v\n%s", err, out)
	}
	if _, err := Verify(context.Background(), repo, digest, k.keys, remoteOpts()); err != nil {
		t.Fatal(err)
	}
}
