package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

// cliBinary builds cmd/stackpilot once per test run: artifacts are pushed
// and signed with the CLI users run.
func cliBinary(t testing.TB) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stackpilot-e2e-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliBin = filepath.Join(dir, "stackpilot")
		cmd := exec.Command("go", "build", "-o", cliBin, "./cmd/stackpilot")
		cmd.Dir = env.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build ./cmd/stackpilot: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliBin
}

// cosignPassword protects the test signing keys (COSIGN_PASSWORD).
const cosignPassword = "e2e-cosign-pass"

// stackpilot runs the CLI and returns its stdout; it fails the test unless
// the exit code is 0.
func stackpilot(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("stackpilot %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBinary(t), args...)
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+cosignPassword, "DOCKER_CONFIG="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// keyPair makes a cosign key pair with the CLI and returns the paths of
// cosign.key and cosign.pub.
func keyPair(t *testing.T) (priv, pub string) {
	t.Helper()
	dir := t.TempDir()
	stackpilot(t, "artifact", "keygen", "--output-dir", dir)
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// ociProgram is the bridge program writing the ConfigMap cm: Stacks in one
// namespace need their own.
func ociProgram(cm, extraData string) string {
	return replaceOnce(bridgeProgram(extraData), "name: app-settings", "name: "+cm)
}

// programDir writes ociProgram into a fresh folder under app/.
func programDir(t *testing.T, cm, extraData string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app", "Pulumi.yaml"), []byte(ociProgram(cm, extraData)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pushProgram pushes ociProgram with the CLI (signed when signKey is set)
// and returns the digest it printed.
func pushProgram(t *testing.T, ref, cm, extraData, signKey string) string {
	t.Helper()
	args := []string{"artifact", "push", ref, "--path", programDir(t, cm, extraData), "--insecure",
		"--source", "https://git.example/infra", "--revision", "main@sha1:0123456789abcdef0123456789abcdef01234567"}
	if signKey != "" {
		args = append(args, "--sign-key", signKey)
	}
	digest := strings.TrimSpace(stackpilot(t, args...))
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != 71 {
		t.Fatalf("stackpilot artifact push printed %q, want the digest alone", digest)
	}
	return digest
}

// ociFixture is a namespace with the passphrase Secret, an in-process
// registry and a controller for that namespace.
type ociFixture struct {
	ns      string
	reg     *testenv.Registry
	ctrl    *controllerProcess
	dataDir string
}

func newOCIFixture(t *testing.T, regOpts ...testenv.RegistryOption) *ociFixture {
	t.Helper()
	f := &ociFixture{ns: env.Namespace(t), reg: testenv.NewRegistry(t, regOpts...), dataDir: t.TempDir()}
	createSecret(t, f.ns, "pulumi-passphrase", map[string]string{"passphrase": passphrase})
	return f
}

func (f *ociFixture) start(t *testing.T, args ...string) {
	f.ctrl = startController(t, f.ns, f.dataDir, args...)
}

// url is the oci:// URL of a repository in the fixture's registry.
func (f *ociFixture) url(repo string) string { return "oci://" + f.reg.Host() + "/" + repo }

func (f *ociFixture) stack(name, repo string, ref v1alpha1.OCIRef, mutate ...func(*v1alpha1.Stack)) *v1alpha1.Stack {
	s := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{
				OCI: &v1alpha1.OCISource{URL: f.url(repo), Ref: &ref, Insecure: true},
				Dir: "app",
			},
			SecretsProvider: &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: "pulumi-passphrase"}},
			Config: map[string]apiextensionsv1.JSON{
				"namespace":                         {Raw: []byte(fmt.Sprintf("%q", f.ns))},
				"kubernetes:enableConfigMapMutable": {Raw: []byte(`true`)},
			},
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// createDockerConfigSecret creates a kubernetes.io/dockerconfigjson Secret,
// as `kubectl create secret docker-registry` does.
func createDockerConfigSecret(t *testing.T, ns, name, host, user, password string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	cfg := fmt.Sprintf(`{"auths":{%q:{"username":%q,"password":%q,"auth":%q}}}`, host, user, password, auth)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(cfg)},
	}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}
