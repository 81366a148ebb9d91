package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stackpilot/stackpilot/internal/oci/cosign"
)

// passwordEnv is cosign's variable for the private key's password; set
// and empty means no password, as in cosign.
const passwordEnv = "COSIGN_PASSWORD"

func (c *cli) newArtifactKeygenCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "keygen [--output-dir DIR]",
		Short: "Write a cosign-compatible key pair: cosign.key (encrypted) and cosign.pub",
		Long: `Writes a new ECDSA P-256 key pair in cosign's format, as ` + "`cosign generate-key-pair`" + `
does: cosign.key, the private key encrypted with the password (COSIGN_PASSWORD,
else asked twice on the terminal), readable by you only, and cosign.pub, the
public key that verifies (put it in the Stack's verify Secret). It never
overwrites a key.`,
		Example: `  COSIGN_PASSWORD=... stackpilot artifact keygen --output-dir ~/.stackpilot
  kubectl -n infra create secret generic cosign-pub --from-file=cosign.pub=$HOME/.stackpilot/cosign.pub`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			priv, pub := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
			for _, p := range []string{priv, pub} {
				if _, err := os.Lstat(p); err == nil {
					return fmt.Errorf("%s exists: keygen never overwrites a key; remove it or pass another --output-dir", p)
				}
			}
			password, err := c.keyPassword("the new private key", true)
			if err != nil {
				return err
			}
			privPEM, pubPEM, err := cosign.GenerateKeyPair(password)
			if err != nil {
				return err
			}
			keys, err := cosign.LoadPublicKeys(pubPEM)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := writeNew(priv, privPEM, 0o600); err != nil {
				return err
			}
			if err := writeNew(pub, pubPEM, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "Wrote %s (private: keep it secret) and %s (public, key ID %s)\n", priv, pub, keys[0].KeyID())
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "output-dir", ".", "The folder to write cosign.key and cosign.pub into.")
	_ = cmd.MarkFlagDirname("output-dir")
	return cmd
}

// writeNew creates path, failing if it exists.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// keyPassword is COSIGN_PASSWORD when set, else asked on the terminal
// (twice when confirm), else an error saying to set it.
func (c *cli) keyPassword(what string, confirm bool) ([]byte, error) {
	if p, ok := os.LookupEnv(passwordEnv); ok {
		return []byte(p), nil
	}
	if !isTerminal(c.stdin) {
		return nil, fmt.Errorf("the password of %s: set %s (empty for a key without one); stdin is not a terminal to ask on", what, passwordEnv)
	}
	p, err := readPassword(c.stdin, c.stderr, "Password for "+what+": ")
	if err != nil || !confirm {
		return p, err
	}
	again, err := readPassword(c.stdin, c.stderr, "Password again: ")
	if err != nil {
		return nil, err
	}
	if string(again) != string(p) {
		return nil, errors.New("the two passwords differ; run it again")
	}
	return p, nil
}

// loadSigner reads a cosign.key and decrypts it.
func (c *cli) loadSigner(path string) (*cosign.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	password, err := c.keyPassword(path, false)
	if err != nil {
		return nil, err
	}
	s, err := cosign.LoadSigner(pem, password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; check %s", path, err, passwordEnv)
	}
	return s, nil
}
