package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

// bearerToken finds the token however the kubeconfig gives it, and sends
// nothing anywhere (the host does not exist).
func TestBearerTokenFromKubeconfig(t *testing.T) {
	g := NewWithT(t)
	host := "https://no-such-host.invalid:6443"

	tok, err := bearerToken(&rest.Config{Host: host, BearerToken: "abc.def"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tok).To(Equal("abc.def"))

	file := filepath.Join(t.TempDir(), "token")
	g.Expect(os.WriteFile(file, []byte("from-file\n"), 0o600)).To(Succeed())
	tok, err = bearerToken(&rest.Config{Host: host, BearerTokenFile: file})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tok).To(Equal("from-file"))

	_, err = bearerToken(&rest.Config{Host: host, Username: "u", Password: "p"})
	g.Expect(err).To(MatchError(ContainSubstring("has no bearer token")))
	g.Expect(err).To(MatchError(ContainSubstring("pass one with --token")))
}
