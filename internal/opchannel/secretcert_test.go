package opchannel

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// kube is one API server for the tests of the Secret-kept certificate,
// started by the first of them: the package's other tests need none.
var kube testenv.Lazy

func kubeEnv(t *testing.T) *testenv.Env { return kube.Get(t) }

// TestMain stops the API server if a test started it.
func TestMain(m *testing.M) {
	code := m.Run()
	kube.Stop()
	os.Exit(code)
}

const secretEndpoint = "https://stackpilot-runner.stackpilot-system.svc:9444"

// replicaDir is the data dir of one replica, where Listen reads the pair.
func replicaDir(t *testing.T, name string) string {
	return filepath.Join(t.TempDir(), name, "runner-tls")
}

func servedCA(t *testing.T, dir string) []byte {
	t.Helper()
	_, caPEM, err := Listen("127.0.0.1:0", secretEndpoint, dir)
	if err != nil {
		t.Fatal(err)
	}
	return caPEM
}

// The first replica creates the Secret; the second, and the first after a
// restart, serve the same certificate: a new leader's adopted Pods trust it.
func TestKeepInSecretSharedByReplicas(t *testing.T) {
	env := kubeEnv(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: env.Namespace(t), Name: "stackpilot-runner-tls"}
	a, b := replicaDir(t, "a"), replicaDir(t, "b")
	if err := KeepInSecret(ctx, env.Client, key, secretEndpoint, a); err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := env.Client.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != corev1.SecretTypeTLS || !bytes.Equal(s.Data["ca.crt"], s.Data["tls.crt"]) || len(s.Data["tls.key"]) == 0 {
		t.Fatalf("the Secret is not a kubernetes.io/tls Secret with its CA: type %s, keys %v", s.Type, keysOf(s.Data))
	}
	if err := KeepInSecret(ctx, env.Client, key, secretEndpoint, b); err != nil {
		t.Fatal(err)
	}
	caA, caB := servedCA(t, a), servedCA(t, b)
	if !bytes.Equal(caA, caB) || !bytes.Equal(caA, s.Data["ca.crt"]) {
		t.Fatal("two replicas serve two certificates: Pods adopted by the other would refuse it")
	}
	again := replicaDir(t, "a-restarted")
	if err := KeepInSecret(ctx, env.Client, key, secretEndpoint, again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(servedCA(t, again), caA) {
		t.Fatal("a restart made a new certificate")
	}
}

// Replicas that start together race to create the Secret: the losers get
// AlreadyExists and serve the winner's certificate.
func TestKeepInSecretCreateRace(t *testing.T) {
	env := kubeEnv(t)
	key := types.NamespacedName{Namespace: env.Namespace(t), Name: "stackpilot-runner-tls"}
	const replicas = 6
	dirs := make([]string, replicas)
	errs := make([]error, replicas)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range replicas {
		dirs[i] = replicaDir(t, string(rune('a'+i)))
		done.Go(func() {
			start.Wait()
			errs[i] = KeepInSecret(context.Background(), env.Client, key, secretEndpoint, dirs[i])
		})
	}
	start.Done()
	done.Wait()
	var s corev1.Secret
	if err := env.Client.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if !bytes.Equal(servedCA(t, dirs[i]), s.Data["ca.crt"]) {
			t.Fatalf("replica %d serves a certificate other than the Secret's", i)
		}
	}
}

// A certificate that expires within a month is renewed once, even when
// replicas renew it at once: the update is conditioned on the version read,
// the loser gets a Conflict and serves the winner's.
func TestKeepInSecretRenewalConflict(t *testing.T) {
	env := kubeEnv(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: env.Namespace(t), Name: "stackpilot-runner-tls"}
	expiring := expiringPair(t)
	stale := &corev1.Secret{}
	stale.Namespace, stale.Name, stale.Type = key.Namespace, key.Name, corev1.SecretTypeTLS
	stale.Data = certSecretData(expiring.cert, expiring.key)
	if err := env.Client.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}

	// Two replicas read the expiring Secret; the first renews it.
	var readByLoser corev1.Secret
	if err := env.Client.Get(ctx, key, &readByLoser); err != nil {
		t.Fatal(err)
	}
	winner := replicaDir(t, "winner")
	if err := KeepInSecret(ctx, env.Client, key, secretEndpoint, winner); err != nil {
		t.Fatal(err)
	}
	renewed := servedCA(t, winner)
	if bytes.Equal(renewed, expiring.cert) {
		t.Fatal("a certificate expiring within a month was kept")
	}
	// The second writes what it made from its stale read: refused.
	if _, _, err := renewCertSecret(ctx, env.Client, &readByLoser, "stackpilot-runner.stackpilot-system.svc"); err != errLostRace {
		t.Fatalf("a renewal from a stale read was not refused as a lost race: %v", err)
	}
	// And through KeepInSecret it serves the winner's.
	loser := replicaDir(t, "loser")
	if err := KeepInSecret(ctx, env.Client, key, secretEndpoint, loser); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(servedCA(t, loser), renewed) {
		t.Fatal("the renewal's loser serves another certificate than the winner's")
	}
	var s corev1.Secret
	if err := env.Client.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Data["ca.crt"], renewed) {
		t.Fatal("the Secret does not hold the winner's certificate")
	}
}

// A Secret the controller may not read fails the start with the Secret's
// name, and no certificate of its own.
func TestKeepInSecretForbidden(t *testing.T) {
	env := kubeEnv(t)
	cfg := *env.Config
	cfg.Impersonate.UserName = "system:serviceaccount:default:nobody"
	c, err := client.New(&cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := replicaDir(t, "a")
	key := types.NamespacedName{Namespace: env.Namespace(t), Name: "stackpilot-runner-tls"}
	err = KeepInSecret(context.Background(), c, key, secretEndpoint, dir)
	if _, ok := err.(*SecretCertError); !ok {
		t.Fatalf("want a SecretCertError, got %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "tls.crt")); statErr == nil {
		t.Fatal("a certificate was written without the Secret")
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

type pemPair struct{ cert, key []byte }

// expiringPair is a pair for the endpoint's host that is valid for two
// more weeks only.
func expiringPair(t *testing.T) pemPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "expiring"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(14 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, DNSNames: []string{"stackpilot-runner.stackpilot-system.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemPair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}
