package runner

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
)

// passphraseCrypter encrypts config values and decrypts state secrets the way
// the CLI's passphrase secrets manager does (pkg/secrets/passphrase): the key is
// PBKDF2 of the passphrase and the salt in the manager's state
// "v1:<base64 salt>:<the word "pulumi" encrypted>", checked by decrypting that word.
//
// The key derivation is deliberately slow (a million PBKDF2 rounds, ~0.3 s), so
// the crypter is made only when a value needs it, and once per operation.
type passphraseCrypter struct {
	state      string // the manager's state (encryptionsalt)
	passphrase string

	once    sync.Once
	crypter config.Crypter
	err     error
}

// ErrNoPassphrase: the stack uses the passphrase secrets provider and neither
// PULUMI_CONFIG_PASSPHRASE nor PULUMI_CONFIG_PASSPHRASE_FILE is given.
var ErrNoPassphrase = errors.New("passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE")

// newPassphraseCrypter returns a crypter for state with the passphrase of env,
// or nil and false when env has none (the caller lets the CLI report it).
func newPassphraseCrypter(state string, env map[string]string) (*passphraseCrypter, bool) {
	phrase, ok := env["PULUMI_CONFIG_PASSPHRASE"]
	if !ok {
		file := env["PULUMI_CONFIG_PASSPHRASE_FILE"]
		if file == "" {
			return nil, false
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, false
		}
		phrase = strings.TrimRight(string(data), "\r\n")
	}
	return &passphraseCrypter{state: state, passphrase: phrase}, true
}

// ErrIncorrectPassphrase: the passphrase does not open the stack's secrets.
var ErrIncorrectPassphrase = errors.New("incorrect passphrase")

func (p *passphraseCrypter) get() (config.Crypter, error) {
	p.once.Do(func() {
		parts := strings.SplitN(p.state, ":", 3)
		if len(parts) != 3 || parts[0] != "v1" {
			p.err = fmt.Errorf("the stack's encryptionsalt %q is not a v1 passphrase state", truncate(p.state, 16))
			return
		}
		salt, err := base64.StdEncoding.DecodeString(parts[1])
		if err != nil {
			p.err = fmt.Errorf("the stack's encryptionsalt: %w", err)
			return
		}
		c := config.NewSymmetricCrypterFromPassphrase(p.passphrase, salt)
		if word, err := c.DecryptValue(context.Background(), parts[2]); err != nil || word != "pulumi" {
			p.err = ErrIncorrectPassphrase
			return
		}
		p.crypter = c
	})
	return p.crypter, p.err
}

func (p *passphraseCrypter) encrypt(plaintext string) (string, error) {
	c, err := p.get()
	if err != nil {
		return "", err
	}
	return c.EncryptValue(context.Background(), plaintext)
}

func (p *passphraseCrypter) decrypt(ciphertext string) (string, error) {
	c, err := p.get()
	if err != nil {
		return "", err
	}
	return c.DecryptValue(context.Background(), ciphertext)
}
