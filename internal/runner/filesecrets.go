package runner

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxCredentialFile bounds what is read of a file named by Env: a kubeconfig
// or a passphrase is small, and a scrubber must not read a blob.
const maxCredentialFile = 1 << 20

// fileSecrets are the credentials that spec.Env names rather than carries,
// so that they are scrubbed like Env values: the tokens, token files,
// passwords and client keys (inline or files) of the kubeconfigs of KUBECONFIG (the
// operation's ServiceAccount token, or the controller's mounted token for a
// program that acts as the controller), and the passphrase of
// PULUMI_CONFIG_PASSPHRASE_FILE. A program that quotes its kubeconfig in an
// error must not put a bearer token into the engine log.
//
// Files are read when a scrubber is made, at the start of the operation: a
// file that is missing or unreadable holds nothing to hide from this run.
func fileSecrets(env map[string]string) []string {
	var out []string
	if path := env["PULUMI_CONFIG_PASSPHRASE_FILE"]; path != "" {
		if s := readCredential(path); s != "" {
			out = append(out, s)
		}
	}
	for _, path := range filepath.SplitList(env["KUBECONFIG"]) {
		if path != "" {
			out = append(out, kubeconfigSecrets(path)...)
		}
	}
	return out
}

// kubeconfigUser is the part of a kubeconfig user that authenticates.
type kubeconfigUser struct {
	Token         string `yaml:"token"`
	TokenFile     string `yaml:"tokenFile"`
	Password      string `yaml:"password"`
	ClientKeyData string `yaml:"client-key-data"`
	ClientKey     string `yaml:"client-key"` // a file
	AuthProvider  *struct {
		Config map[string]string `yaml:"config"`
	} `yaml:"auth-provider"`
}

func kubeconfigSecrets(path string) []string {
	data := readCredential(path)
	if data == "" {
		return nil
	}
	var kc struct {
		Users []struct {
			User kubeconfigUser `yaml:"user"`
		} `yaml:"users"`
	}
	if yaml.Unmarshal([]byte(data), &kc) != nil {
		return nil
	}
	var out []string
	for _, u := range kc.Users {
		a := u.User
		out = append(out, a.Token, a.Password, a.ClientKeyData)
		for _, file := range []string{a.TokenFile, a.ClientKey} {
			if file != "" {
				out = append(out, readCredential(file))
			}
		}
		if key, err := base64.StdEncoding.DecodeString(a.ClientKeyData); err == nil {
			out = append(out, string(key))
		}
		if a.AuthProvider != nil {
			for k, v := range a.AuthProvider.Config {
				if strings.Contains(strings.ToLower(k), "token") || strings.Contains(strings.ToLower(k), "secret") {
					out = append(out, v)
				}
			}
		}
	}
	kept := out[:0]
	for _, s := range out {
		if s = strings.TrimSpace(s); s != "" {
			kept = append(kept, s)
		}
	}
	return kept
}

// readCredential is a small file's text without its surrounding space; ""
// when it cannot be read or is too large to be a credential.
func readCredential(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxCredentialFile+1)
	n, _ := f.Read(buf)
	if n > maxCredentialFile {
		return ""
	}
	return strings.TrimSpace(string(buf[:n]))
}

// secretValues are all the values a scrubber of spec hides: the secret
// config values in every string form, the values of Env, and the
// credentials of the files Env names.
func secretValues(spec Spec) []string {
	values := secretStrings(spec.Config)
	for _, v := range spec.Env {
		values = append(values, v)
	}
	return append(values, fileSecrets(spec.Env)...)
}
