package cosign

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestGenerateKeyPairFormat(t *testing.T) {
	priv, pub, err := GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(priv, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")) {
		t.Errorf("private key is not cosign's encrypted PEM:\n%s", priv)
	}
	if !bytes.HasPrefix(pub, []byte("-----BEGIN PUBLIC KEY-----")) {
		t.Errorf("public key is not a PKIX PEM:\n%s", pub)
	}
	s, err := LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadPublicKeys(pub)
	if err != nil {
		t.Fatal(err)
	}
	if s.PublicKey().KeyID() != keys[0].KeyID() || !strings.HasPrefix(keys[0].KeyID(), "sha256:") {
		t.Errorf("signer key %s, public key %s: want the same sha256: ID", s.PublicKey().KeyID(), keys[0].KeyID())
	}
	if !bytes.Equal(keys[0].PEM(), pub) {
		t.Errorf("PEM() = %s, want %s", keys[0].PEM(), pub)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(f, s); strings.Contains(out, "PRIVATE") || !strings.Contains(out, keys[0].KeyID()) {
			t.Errorf("Sprintf(%q, signer) = %q: want the key ID only", f, out)
		}
	}
}

func TestLoadSignerWrongPassword(t *testing.T) {
	priv, _, err := GenerateKeyPair([]byte("right"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadSigner(priv, []byte("wrong"))
	if err == nil {
		t.Fatal("LoadSigner with the wrong password succeeded")
	}
	if !strings.Contains(err.Error(), "password") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("error %q: want it to name the password without echoing it", err)
	}
}

func TestLoadPublicKeysNamesTheBadOne(t *testing.T) {
	_, pub, err := GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadPublicKeys(pub, []byte("not a key"))
	if err == nil || !strings.Contains(err.Error(), "public key 2 of 2") {
		t.Fatalf("LoadPublicKeys(good, bad) error = %v: want it to name key 2 of 2", err)
	}
	if _, err := LoadPublicKeys(); err == nil {
		t.Error("LoadPublicKeys() with no key succeeded")
	}
	if _, err := LoadPublicKey("cosign.pub", []byte("x")); err == nil || !strings.Contains(err.Error(), "cosign.pub") {
		t.Errorf("LoadPublicKey error = %v: want the name", err)
	}
}
