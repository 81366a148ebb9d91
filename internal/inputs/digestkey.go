package inputs

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/serror"
)

// DigestKeyDataKey is the key, in the digest key Secret, of the HMAC key.
const DigestKeyDataKey = "key"

// DigestKeySize is the length of a key the controller creates (HMAC-SHA256's block
// is 64 bytes; 32 random bytes make guessing the key as hard as the hash).
const DigestKeySize = 32

// The digest key Secret is granted by a Role of the controller's own namespace
// (config/rbac/role.yaml, bound in digest_key_role_binding.yaml), by name for
// reads: it does not depend on the cluster-wide Secret rights the inputs and
// outputs need, so an install that narrows those keeps it. Create cannot be
// limited by name (the API server knows no name before the object exists).
// +kubebuilder:rbac:groups="",namespace=stackpilot-system,resources=secrets,resourceNames=stackpilot-digest-key,verbs=get
// +kubebuilder:rbac:groups="",namespace=stackpilot-system,resources=secrets,verbs=create

// DigestKey is the secret key of the inputs digest. The digest is an HMAC over
// the inputs, Secret values included, and is shown in every Stack's status:
// without a key anyone who may read a Stack could test guesses of a weak
// passphrase against it offline. The key lives in a Secret of the controller's
// own namespace, created by the first replica that needs it.
type DigestKey struct {
	// Client creates the Secret.
	Client client.Writer
	// Reader reads it straight from the API server: the controller caches no
	// Secrets (a cached read would start a cluster-wide Secret informer).
	Reader client.Reader
	// Secret names the Secret.
	Secret types.NamespacedName

	mu  sync.Mutex
	key []byte
}

// Get returns the key, reading or creating its Secret the first time. The key is
// then kept for the life of the process: a replaced Secret takes effect at the
// next start (and changes every digest, so each Stack runs one up).
func (d *DigestKey) Get(ctx context.Context) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.key != nil {
		return d.key, nil
	}
	key, err := d.load(ctx)
	if err != nil {
		return nil, serror.Transient(v1alpha1.DigestKeyUnavailableReason, fmt.Errorf("inputs digest key, Secret %s: %w", d.Secret, err))
	}
	d.key = key
	return key, nil
}

// StaticDigestKey is a DigestKey that already holds key and never reads
// or writes a Secret (tests, and callers that bring their own key).
func StaticDigestKey(key []byte) *DigestKey {
	return &DigestKey{key: key}
}

// load reads the Secret, or creates it with a fresh random key. Two replicas
// starting at once both try to create it; the loser reads the winner's key, so
// they agree.
func (d *DigestKey) load(ctx context.Context) ([]byte, error) {
	var s corev1.Secret
	err := d.Reader.Get(ctx, d.Secret, &s)
	if err == nil {
		return keyOf(&s)
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read: %w", err)
	}
	key := make([]byte, DigestKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Secret.Name, Namespace: d.Secret.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "stackpilot-controller"},
			Annotations: map[string]string{
				"stackpilot.dev/purpose": "HMAC key of the Stacks' status.inputsDigest; replacing it makes every Stack run one up",
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{DigestKeyDataKey: key},
	}
	err = d.Client.Create(ctx, &s)
	switch {
	case err == nil:
		return key, nil
	case apierrors.IsAlreadyExists(err):
		var existing corev1.Secret
		if err := d.Reader.Get(ctx, d.Secret, &existing); err != nil {
			return nil, fmt.Errorf("read after a concurrent create: %w", err)
		}
		return keyOf(&existing)
	default:
		return nil, fmt.Errorf("create: %w", err)
	}
}

func keyOf(s *corev1.Secret) ([]byte, error) {
	key := s.Data[DigestKeyDataKey]
	if len(key) < DigestKeySize {
		return nil, fmt.Errorf("key %q holds %d bytes, want at least %d: delete the Secret and the controller creates a new key",
			DigestKeyDataKey, len(key), DigestKeySize)
	}
	return key, nil
}
