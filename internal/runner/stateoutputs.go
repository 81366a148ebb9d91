package runner

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Pulumi's marker of a secret in serialized state: an object with this key and
// value, and the secret in "ciphertext" (a checkpoint) or "plaintext" (`stack
// export --show-secrets`), JSON-encoded.
const (
	secretSigKey   = "4dabf18193072939515e22adb298388d"
	secretSigValue = "1b47061264138c4ac30d75fd1eb44270"
	rootStackType  = "pulumi:pulumi:Stack"
)

// errNeedsCrypter says that a ciphertext was found and no crypter was given.
var errNeedsCrypter = errors.New("the outputs hold encrypted secrets")

// stackOutputs returns the root stack's outputs of a deployment, secrets
// decrypted with crypt (nil: fail with errNeedsCrypter on the first ciphertext).
// An output is Secret when it or anything inside it is.
func (d *deployment) stackOutputs(crypt *passphraseCrypter) (map[string]Output, error) {
	if d == nil {
		return nil, nil
	}
	for _, r := range d.Resources {
		if r.Type != rootStackType || r.Parent != "" {
			continue
		}
		out := make(map[string]Output, len(r.Outputs))
		for k, raw := range r.Outputs {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, fmt.Errorf("output %q: %w", k, err)
			}
			plain, secret, err := revealSecrets(v, crypt)
			if err != nil {
				return nil, fmt.Errorf("output %q: %w", k, err)
			}
			out[k] = Output{Value: plain, Secret: secret}
		}
		if len(out) == 0 {
			return nil, nil
		}
		return out, nil
	}
	return nil, nil
}

// hasCiphertext says whether any root stack output holds an encrypted secret.
func (d *deployment) hasCiphertext() bool {
	if d == nil {
		return false
	}
	for _, r := range d.Resources {
		if r.Type != rootStackType || r.Parent != "" {
			continue
		}
		for _, raw := range r.Outputs {
			var v any
			if json.Unmarshal(raw, &v) == nil && containsCiphertext(v) {
				return true
			}
		}
	}
	return false
}

func containsCiphertext(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		if t[secretSigKey] == secretSigValue {
			_, ok := t["ciphertext"]
			return ok
		}
		for _, e := range t {
			if containsCiphertext(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if containsCiphertext(e) {
				return true
			}
		}
	}
	return false
}

// revealSecrets replaces every secret marker in v by its value.
func revealSecrets(v any, crypt *passphraseCrypter) (any, bool, error) {
	switch t := v.(type) {
	case map[string]any:
		if t[secretSigKey] == secretSigValue {
			text, err := secretText(t, crypt)
			if err != nil {
				return nil, true, err
			}
			var inner any
			if err := json.Unmarshal([]byte(text), &inner); err != nil {
				return nil, true, fmt.Errorf("a secret's value is not JSON: %w", err)
			}
			plain, _, err := revealSecrets(inner, crypt)
			return plain, true, err
		}
		secret := false
		out := make(map[string]any, len(t))
		for k, e := range t {
			p, s, err := revealSecrets(e, crypt)
			if err != nil {
				return nil, secret, err
			}
			out[k], secret = p, secret || s
		}
		return out, secret, nil
	case []any:
		secret := false
		out := make([]any, len(t))
		for i, e := range t {
			p, s, err := revealSecrets(e, crypt)
			if err != nil {
				return nil, secret, err
			}
			out[i], secret = p, secret || s
		}
		return out, secret, nil
	default:
		return v, false, nil
	}
}

func secretText(m map[string]any, crypt *passphraseCrypter) (string, error) {
	if p, ok := m["plaintext"].(string); ok {
		return p, nil
	}
	ct, ok := m["ciphertext"].(string)
	if !ok {
		return "", errors.New("a secret without plaintext or ciphertext")
	}
	if crypt == nil {
		return "", errNeedsCrypter
	}
	return crypt.decrypt(ct)
}
