package git

import (
	"errors"
	"fmt"
	"testing"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

func TestNewAuthHTTP(t *testing.T) {
	g := NewWithT(t)
	const url = "https://git.example.com/org/repo.git"

	a, err := NewAuth(url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(BeNil(), "no data: anonymous")
	g.Expect(a.Method()).To(BeNil())
	g.Expect(a.Digest()).To(BeEmpty())

	a, err = NewAuth(url, map[string][]byte{"username": []byte("alice"), "password": []byte("hunter2-secret")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Method()).To(Equal(&githttp.BasicAuth{Username: "alice", Password: "hunter2-secret"}))
	g.Expect(a.Digest()).To(HavePrefix("sha256:"))
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a), a.Digest()} {
		g.Expect(s).NotTo(ContainSubstring("hunter2"))
	}

	a, err = NewAuth(url, map[string][]byte{"bearerToken": []byte("tok"), "ca.crt": []byte("PEM")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Method()).To(Equal(&githttp.TokenAuth{Token: "tok"}))
	g.Expect(a.CABundle()).To(Equal([]byte("PEM")))

	// The digest identifies the data, whatever the map order.
	d1, _ := NewAuth(url, map[string][]byte{"username": []byte("a"), "password": []byte("b")})
	d2, _ := NewAuth(url, map[string][]byte{"password": []byte("b"), "username": []byte("a")})
	d3, _ := NewAuth(url, map[string][]byte{"username": []byte("a"), "password": []byte("c")})
	g.Expect(d1.Digest()).To(Equal(d2.Digest()))
	g.Expect(d1.Digest()).NotTo(Equal(d3.Digest()))
}

func TestNewAuthRefusesBadSecrets(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.WithSSH())
	sshURL := srv.SSHURL("repo")
	identity, knownHosts := srv.SSHIdentity(), srv.KnownHosts()
	otherHost := withHost(knownHosts, "[127.0.0.1]:1")

	for name, tc := range map[string]struct {
		url  string
		data map[string][]byte
		key  string
		want string
	}{
		"password without username": {
			url: "https://h/r.git", data: map[string][]byte{"password": []byte("pw-value")},
			key: "username", want: "is required with password",
		},
		"token and basic auth": {
			url: "https://h/r.git", data: map[string][]byte{"bearerToken": []byte("tok-value"), "username": []byte("u")},
			key: "bearerToken", want: "cannot be combined",
		},
		"ssh without secret": {
			url: sshURL, data: nil, key: "identity", want: "required for SSH",
		},
		"ssh without known_hosts": {
			url: sshURL, data: map[string][]byte{"identity": identity},
			key: "known_hosts", want: "cannot be verified",
		},
		"ssh with a broken key": {
			url: sshURL, data: map[string][]byte{"identity": []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nbm9wZQ==\n-----END OPENSSH PRIVATE KEY-----\n"), "known_hosts": knownHosts},
			key: "identity", want: "cannot be parsed",
		},
		"ssh with an encrypted key and no password": {
			url: sshURL, data: map[string][]byte{"identity": srv.SSHIdentityWithPassphrase(t, "pass-value"), "known_hosts": knownHosts},
			key: "password", want: "identity is encrypted",
		},
		"ssh with the wrong password": {
			url: sshURL, data: map[string][]byte{"identity": srv.SSHIdentityWithPassphrase(t, "pass-value"), "password": []byte("wrong-value"), "known_hosts": knownHosts},
			key: "identity", want: "password is wrong",
		},
		"ssh with known_hosts for another host": {
			url: sshURL, data: map[string][]byte{"identity": identity, "known_hosts": otherHost},
			key: "known_hosts", want: "has no entry for 127.0.0.1:",
		},
		"ssh with garbage known_hosts": {
			url: sshURL, data: map[string][]byte{"identity": identity, "known_hosts": []byte("not a known hosts line")},
			key: "known_hosts", want: "cannot be parsed",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := NewAuth(tc.url, tc.data)
			var ae *source.AuthError
			g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
			g.Expect(ae.Key).To(Equal(tc.key))
			g.Expect(ae.InvalidSecret()).To(BeTrue())
			g.Expect(source.IsStalling(err)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("%q", tc.key)))
			g.Expect(err.Error()).NotTo(ContainSubstring("-value"), "no secret value in the message")
		})
	}

	t.Run("ssh with identity and known_hosts", func(t *testing.T) {
		g := NewWithT(t)
		a, err := NewAuth(sshURL, srv.SSHSecretData())
		g.Expect(err).NotTo(HaveOccurred())
		keys, ok := a.Method().(*gitssh.PublicKeys)
		g.Expect(ok).To(BeTrue())
		g.Expect(keys.User).To(Equal("git"))
		g.Expect(keys.HostKeyAlgorithms).To(ContainElement("ssh-ed25519"))
	})
}
