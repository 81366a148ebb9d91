package inputs

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/atomicfile"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/serror"
)

// A rollback applies the last applied revision with the inputs it was applied
// with; by then the ConfigMaps and Secrets they came from usually hold the new
// values (their change is what failed). So each successful up of a Stack with
// spec.rollback on keeps its resolved inputs in the controller's data dir:
// one file per Stack (<inputs dir>/<uid>/<digest file>), replaced at each
// successful up, removed with the Stack. The file holds Secret values, so it
// is encrypted (AES-256-GCM, a key derived from the inputs digest key, bound
// to the Stack's UID and the inputs digest) and readable by the controller's
// user alone.

// ErrNotKept: no snapshot of those inputs is kept (a new data dir, or
// rollback turned on after they were applied).
var ErrNotKept = errors.New("not kept")

// inputsSnapshot is the file's plain text.
type inputsSnapshot struct {
	Backend        string               `json:"backend"`
	Config         []runner.ConfigValue `json:"config"`
	Env            map[string]string    `json:"env"`
	ServiceAccount string               `json:"serviceAccount"`
	Digest         string               `json:"digest"`
	Secrets        []string             `json:"secrets"`
}

// snapshotKeyInfo separates this key from any other derived from the digest key.
const snapshotKeyInfo = "stackpilot.dev/inputs-snapshot/v1"

// Snapshots keeps the last applied inputs of each Stack, encrypted, in Dir
// ("" keeps none), with a key derived from the inputs digest key.
type Snapshots struct {
	Dir string
	Key *DigestKey
}

// Write keeps in as the inputs of the Stack uid's latest successful up.
func (r *Snapshots) Write(ctx context.Context, uid types.UID, in *Inputs) error {
	aead, err := r.cipher(ctx)
	if err != nil {
		return err
	}
	plain, err := json.Marshal(inputsSnapshot{
		Backend: in.Backend, Config: in.Config, Env: in.Env, ServiceAccount: in.ServiceAccount,
		Digest: in.Digest, Secrets: keptSecrets(in),
	})
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := aead.Seal(nonce, nonce, plain, snapshotAAD(uid, in.Digest))
	dir := filepath.Join(r.Dir, string(uid))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The previous inputs stay until the status records this up
	// (Prune): should the controller die before, the up runs again,
	// and if it fails then, its rollback needs them.
	return atomicfile.Write(filepath.Join(dir, snapshotFile(in.Digest)), sealed, 0o600)
}

// Prune removes every kept inputs file of a Stack but the one of
// digest, the inputs status says were applied last (a rollback goes back to
// those alone), once that status is in the API server (the controller's data_dir.go).
func (r *Snapshots) Prune(ctx context.Context, uid types.UID, digest string) {
	if r.Dir == "" || uid == "" || digest == "" {
		return
	}
	dir := filepath.Join(r.Dir, string(uid))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // none kept
	}
	keep := snapshotFile(digest)
	for _, e := range entries {
		if e.Name() != keep {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				log.FromContext(ctx).Error(err, "remove inputs kept of an older up")
			}
		}
	}
}

// Kept reads the inputs kept for digest; ErrNotKept when there
// are none.
func (r *Snapshots) Kept(ctx context.Context, uid types.UID, digest string) (*Inputs, error) {
	if r.Dir == "" {
		return nil, ErrNotKept
	}
	sealed, err := os.ReadFile(filepath.Join(r.Dir, string(uid), snapshotFile(digest)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotKept
	}
	if err != nil {
		return nil, err
	}
	aead, err := r.cipher(ctx)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("the kept inputs file is truncated")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], snapshotAAD(uid, digest))
	if err != nil {
		// Another digest key (the Secret was replaced) or a damaged file.
		return nil, errors.New("the kept inputs cannot be decrypted (was the inputs digest key replaced?)")
	}
	var snap inputsSnapshot
	if err := json.Unmarshal(plain, &snap); err != nil {
		return nil, fmt.Errorf("the kept inputs are malformed: %w", err)
	}
	if snap.Digest != digest {
		return nil, errors.New("the kept inputs are of other inputs")
	}
	if snap.Env == nil {
		snap.Env = map[string]string{}
	}
	return &Inputs{Backend: snap.Backend, Config: snap.Config, Env: snap.Env, ServiceAccount: snap.ServiceAccount,
		Digest: snap.Digest, Secrets: snap.Secrets}, nil
}

// Forget removes what is kept of a Stack's inputs.
func (r *Snapshots) Forget(ctx context.Context, uid types.UID) {
	if r.Dir == "" || uid == "" {
		return
	}
	if err := os.RemoveAll(filepath.Join(r.Dir, string(uid))); err != nil {
		log.FromContext(ctx).Error(err, "remove the kept inputs")
	}
}

func (r *Snapshots) cipher(ctx context.Context) (cipher.AEAD, error) {
	if r.Key == nil {
		return nil, serror.Transient(v1alpha1.DigestKeyUnavailableReason, errors.New("the controller has no inputs digest key"))
	}
	secret, err := r.Key.Get(ctx)
	if err != nil {
		return nil, err
	}
	key, err := hkdf.Key(sha256.New, secret, nil, snapshotKeyInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// snapshotAAD binds a file to its Stack and inputs: one cannot be passed off
// as another's.
func snapshotAAD(uid types.UID, digest string) []byte {
	return []byte(string(uid) + "\x00" + digest)
}

// snapshotFile is the file name for a digest (any string is safe as a name
// once hashed).
func snapshotFile(digest string) string {
	sum := sha256.Sum256([]byte(digest))
	return hex.EncodeToString(sum[:]) + ".inputs"
}

// keptSecrets are the values to scrub from a rollback's messages: those of
// in.Secrets that are among the inputs (a ServiceAccount token added for one
// operation is not: it expires, and the rollback asks for a new one).
func keptSecrets(in *Inputs) []string {
	var kept []string
	for _, s := range in.Secrets {
		found := slices.ContainsFunc(in.Config, func(c runner.ConfigValue) bool { v, ok := c.Value.(string); return ok && v == s })
		for _, v := range in.Env {
			found = found || v == s
		}
		if found && !slices.Contains(kept, s) {
			kept = append(kept, s)
		}
	}
	return kept
}
