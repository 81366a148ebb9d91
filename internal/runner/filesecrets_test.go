package runner

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestScrubbersHideCredentialsOfNamedFiles: Env names a kubeconfig (and a
// passphrase file) rather than carrying their credentials; a message or an
// engine log line that quotes them still shows "[secret]" in their place.
func TestScrubbersHideCredentialsOfNamedFiles(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	const (
		token     = "eyJhbGciOiJSUzI1NiJ9.sa-token-of-the-operation.sig"
		fileToken = "eyJhbGciOiJSUzI1NiJ9.mounted-token-of-the-controller.sig"
		password  = "basic-auth-password"
		phrase    = "passphrase-in-a-file"
	)
	key := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIKeyLineOneOfThePrivateKey\n-----END EC PRIVATE KEY-----\n"
	g.Expect(os.WriteFile(filepath.Join(dir, "token"), []byte(fileToken+"\n"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "phrase"), []byte(phrase+"\n"), 0o600)).To(Succeed())
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users:
- name: sa
  user:
    token: ` + token + `
- name: pod
  user:
    tokenFile: ` + filepath.Join(dir, "token") + `
- name: basic
  user: {username: admin, password: ` + password + `}
- name: cert
  user:
    client-key-data: ` + base64.StdEncoding.EncodeToString([]byte(key)) + `
contexts: [{name: s, context: {cluster: c, user: sa}}]
current-context: s
`
	g.Expect(os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kubeconfig), 0o600)).To(Succeed())
	spec := Spec{Env: map[string]string{
		// A list, as client-go reads it; a missing file is no error.
		"KUBECONFIG":                    filepath.Join(dir, "missing") + ":" + filepath.Join(dir, "kubeconfig"),
		"PULUMI_CONFIG_PASSPHRASE_FILE": filepath.Join(dir, "phrase"),
	}}
	secrets := []string{token, fileToken, password, phrase, "MHcCAQEEIKeyLineOneOfThePrivateKey",
		base64.StdEncoding.EncodeToString([]byte(key))}

	quoted := "error: configured Kubernetes cluster is unreachable: " + kubeconfig + " tokens " + fileToken + " " + phrase
	got := Redact(spec, quoted)
	for _, s := range secrets {
		g.Expect(got).NotTo(ContainSubstring(s))
	}
	g.Expect(got).To(ContainSubstring("https://127.0.0.1:6443"), "the rest stays readable")

	spec.LogFile = filepath.Join(dir, "op.log")
	l, err := openEngineLog(spec)
	g.Expect(err).NotTo(HaveOccurred())
	_, _ = l.stderrTee(nil).Write([]byte(quoted + "\n" + key))
	l.close()
	data, err := os.ReadFile(spec.LogFile)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range secrets {
		g.Expect(string(data)).NotTo(ContainSubstring(s))
	}
	g.Expect(strings.Count(string(data), Redacted)).To(BeNumerically(">=", 6))
}
