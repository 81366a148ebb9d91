package opchannel

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Secret is granted by the Role of the controller's namespace
// (config/rbac/role.yaml), by name for get and update; create cannot be
// limited by name (the API server knows no name before the object exists),
// and the digest key's Role already grants it. Shards name theirs
// stackpilot-runner-tls-<hash> (cmd/controller), which the ClusterRole's
// Secret rights cover.
// +kubebuilder:rbac:groups="",namespace=stackpilot-system,resources=secrets,resourceNames=stackpilot-runner-tls,verbs=get;update

// KeepInSecret makes sure the Secret key (type kubernetes.io/tls, with
// ca.crt) holds a certificate for the runner channel valid for endpoint's
// host for at least another month, and writes that pair into dir, where
// Listen(addr, endpoint, dir) serves it.
//
// Why a Secret: the replicas of one shard share their runner Pods. A new
// leader adopts the Jobs the old one started, and their Pods trust only the
// CA they were given at start, so every replica must serve one certificate;
// kept in each replica's data dir (KeepSelfSigned) they would be as many.
//
// The first replica that finds none creates it; one that loses that race
// (AlreadyExists) reads the winner's. A certificate that expires within a
// month, or names another host, is replaced by an update conditioned on the
// resourceVersion read: of two replicas renewing at once one update wins,
// the other gets a Conflict and reads the winner's, so they never serve two
// certificates. The certificate and key are never logged.
func KeepInSecret(ctx context.Context, c client.Client, key types.NamespacedName, endpoint, dir string) error {
	host, err := endpointHost(endpoint)
	if err != nil {
		return err
	}
	// Each lost race means another replica wrote a valid pair just now: the
	// next read takes it. A few rounds only bound a pathological loop.
	for range 5 {
		certPEM, keyPEM, err := keepInSecretOnce(ctx, c, key, host)
		if errors.Is(err, errLostRace) {
			continue
		}
		if err != nil {
			return &SecretCertError{Secret: key, Err: err}
		}
		return writeKeyPair(dir, certPEM, keyPEM)
	}
	return &SecretCertError{Secret: key, Err: errors.New("other writers kept replacing it")}
}

// SecretCertError says the runner channel's certificate could not be kept
// in its Secret: the API server refused (RBAC: get, create and update of
// that Secret in the controller's namespace) or could not be reached.
type SecretCertError struct {
	Secret types.NamespacedName
	Err    error
}

func (e *SecretCertError) Error() string {
	return fmt.Sprintf("runner channel certificate in Secret %s: %v", e.Secret, e.Err)
}

func (e *SecretCertError) Unwrap() error { return e.Err }

// errLostRace: another replica created or updated the Secret between our
// read and our write.
var errLostRace = errors.New("another replica wrote the certificate first")

// Keys of the Secret: kubernetes.io/tls's, and the CA the Pods trust (the
// self-signed certificate itself), as cert-manager writes it.
const (
	secretCertKey = corev1.TLSCertKey
	secretKeyKey  = corev1.TLSPrivateKeyKey
	secretCAKey   = "ca.crt"
)

// keepInSecretOnce is one read and at most one write.
func keepInSecretOnce(ctx context.Context, c client.Client, key types.NamespacedName, host string) (certPEM, keyPEM []byte, err error) {
	var s corev1.Secret
	err = c.Get(ctx, key, &s)
	switch {
	case apierrors.IsNotFound(err):
		return createCertSecret(ctx, c, key, host)
	case err != nil:
		return nil, nil, err
	}
	if certValid(s.Data[secretCertKey], s.Data[secretKeyKey], host) && bytes.Equal(s.Data[secretCAKey], s.Data[secretCertKey]) {
		return s.Data[secretCertKey], s.Data[secretKeyKey], nil
	}
	return renewCertSecret(ctx, c, &s, host)
}

func createCertSecret(ctx context.Context, c client.Client, key types.NamespacedName, host string) ([]byte, []byte, error) {
	certPEM, keyPEM, err := selfSignedPEM(host)
	if err != nil {
		return nil, nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{
			"app.kubernetes.io/name":    "stackpilot-controller",
			"app.kubernetes.io/part-of": "stackpilot",
		}},
		Type: corev1.SecretTypeTLS,
		Data: certSecretData(certPEM, keyPEM),
	}
	switch err := c.Create(ctx, s); {
	case apierrors.IsAlreadyExists(err):
		return nil, nil, errLostRace
	case err != nil:
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// renewCertSecret replaces s's pair, conditioned on the resourceVersion s
// was read at (an Update carries it; the API server refuses it with a
// Conflict once another write came between).
func renewCertSecret(ctx context.Context, c client.Client, s *corev1.Secret, host string) ([]byte, []byte, error) {
	certPEM, keyPEM, err := selfSignedPEM(host)
	if err != nil {
		return nil, nil, err
	}
	// The type stays as it is: the API server refuses to change it.
	s.Data = certSecretData(certPEM, keyPEM)
	switch err := c.Update(ctx, s); {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return nil, nil, errLostRace
	case err != nil:
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func certSecretData(certPEM, keyPEM []byte) map[string][]byte {
	return map[string][]byte{secretCertKey: certPEM, secretKeyKey: keyPEM, secretCAKey: certPEM}
}
