package inputs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/serror"
)

func TestResolveServiceAccount(t *testing.T) {
	ctx := context.Background()
	sa := func(name string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "infra"}}
	}
	tests := []struct {
		name, spec, dflt string
		objects          []client.Object
		want             string
		waitMessage      string
	}{
		{name: "none: the controller's identity"},
		{name: "the spec's", spec: "deployer", dflt: "locked", objects: []client.Object{sa("deployer")}, want: "deployer"},
		{name: "the controller's default", dflt: "locked", objects: []client.Object{sa("locked")}, want: "locked"},
		{name: "missing from the spec waits", spec: "deployer", waitMessage: "spec.serviceAccountName: ServiceAccount deployer not found in namespace infra"},
		{name: "missing default waits", dflt: "locked", waitMessage: "--default-service-account: ServiceAccount locked not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Resolver{Client: fake.NewClientBuilder().WithObjects(tt.objects...).Build(), DefaultServiceAccount: tt.dflt}
			s := stackFixture()
			s.Spec.ServiceAccountName = tt.spec
			in := &Inputs{}
			err := r.resolveServiceAccount(ctx, s, in)
			if tt.waitMessage != "" {
				var w *serror.WaitingError
				g.Expect(errors.As(err, &w)).To(BeTrue(), "%v", err)
				g.Expect(w.Reason).To(Equal(v1alpha1.ServiceAccountNotFoundReason))
				g.Expect(err.Error()).To(ContainSubstring(tt.waitMessage))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(in.ServiceAccount).To(Equal(tt.want))
		})
	}
}

// With a ServiceAccount the runner gets a kubeconfig of its own holding only
// the ServiceAccount's token, and none of the controller's cluster variables.
func TestRunnerEnvWithServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var requested *authenticationv1.TokenRequest
	c := fake.NewClientBuilder().WithObjects(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "infra"}}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
				requested = subObj.(*authenticationv1.TokenRequest).DeepCopy()
				g.Expect(sub).To(Equal("token"))
				g.Expect(obj.GetNamespace() + "/" + obj.GetName()).To(Equal("infra/deployer"))
				subObj.(*authenticationv1.TokenRequest).Status.Token = "sa-token-abcdef123456"
				return nil
			},
		}).Build()
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	r := Tenancy{
		RESTConfig: &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "controller-token-999",
			TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: []byte("controller-cert"), KeyData: []byte("controller-key")}},
		OwnClusterEnv: map[string]string{"KUBECONFIG": "/controller/kubeconfig", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
	}
	stack := stackFixture()
	stack.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Minute}
	in := &Inputs{ServiceAccount: "deployer", Env: map[string]string{"PULUMI_CONFIG_PASSPHRASE": "pw", "KUBECONFIG": "/from/envFrom"}}
	dir := t.TempDir()

	env, err := r.Env(ctx, c, in, stack.Namespace, stack.GetTimeout(), dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(HaveKeyWithValue("KUBECONFIG", filepath.Join(dir, "kubeconfig")))
	g.Expect(env).To(HaveKeyWithValue("PULUMI_CONFIG_PASSPHRASE", "pw"))
	g.Expect(env).NotTo(HaveKey("KUBERNETES_SERVICE_HOST"))
	g.Expect(env).NotTo(HaveKey("KUBERNETES_SERVICE_PORT"))
	g.Expect(in.Env).To(HaveKeyWithValue("KUBECONFIG", "/from/envFrom"), "the resolved inputs are left as they were")
	g.Expect(in.Secrets).To(ContainElement("sa-token-abcdef123456"), "the token is scrubbed from messages")
	g.Expect(*requested.Spec.ExpirationSeconds).To(BeEquivalentTo((35 * time.Minute).Seconds()), "the timeout plus a margin")

	info, err := os.Stat(env["KUBECONFIG"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	raw, err := os.ReadFile(env["KUBECONFIG"])
	g.Expect(err).NotTo(HaveOccurred())
	for _, own := range []string{"controller-token-999", "controller-cert", "controller-key", "/controller/kubeconfig"} {
		g.Expect(string(raw)).NotTo(ContainSubstring(own))
	}
	cfg, err := clientcmd.Load(raw)
	g.Expect(err).NotTo(HaveOccurred())
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Host).To(Equal("https://127.0.0.1:6443"))
	g.Expect(rc.BearerToken).To(Equal("sa-token-abcdef123456"))
	g.Expect(rc.CAData).To(Equal(ca))
	g.Expect(rc.CertData).To(BeEmpty())
	ns, _, err := clientcmd.NewDefaultClientConfig(*cfg, nil).Namespace()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns).To(Equal("infra"))
}

func TestRunnerEnvTokenLifetime(t *testing.T) {
	g := NewWithT(t)
	var seconds int64
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			tr := subObj.(*authenticationv1.TokenRequest)
			seconds = *tr.Spec.ExpirationSeconds
			tr.Status.Token = "t-123456"
			return nil
		},
	}).Build()
	_, err := requestToken(context.Background(), c, "infra", "deployer", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seconds).To(BeEquivalentTo(600), "at least the 10 minutes the API server requires")

	// A long timeout does not make a long-lived credential: a year-long
	// timeout gets a token of maxTokenTTL, like any timeout past it.
	for timeout, want := range map[time.Duration]time.Duration{
		30 * time.Minute: 35 * time.Minute, 8760 * time.Hour: 2 * time.Hour, 2 * time.Hour: 2 * time.Hour,
	} {
		_, err := requestToken(context.Background(), c, "infra", "deployer", timeout)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(seconds).To(BeEquivalentTo(want.Seconds()), "timeout %s", timeout)
	}
}

func TestRunnerEnvWithoutServiceAccount(t *testing.T) {
	g := NewWithT(t)
	own := map[string]string{"KUBECONFIG": "/controller/kubeconfig"}
	r := Tenancy{OwnClusterEnv: own}
	dir := t.TempDir()
	env, err := r.Env(context.Background(), nil, &Inputs{Env: map[string]string{"A": "b"}}, "infra", time.Minute, dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"A": "b", "KUBECONFIG": "/controller/kubeconfig"}), "the controller's own identity")
	g.Expect(filepath.Join(dir, "kubeconfig")).NotTo(BeAnExistingFile())
}

func TestRunnerEnvTokenRefused(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
			return errors.New(`serviceaccounts "deployer" is forbidden`)
		},
	}).Build()
	r := Tenancy{RESTConfig: &rest.Config{Host: "https://h"}}
	_, err := r.Env(context.Background(), c, &Inputs{ServiceAccount: "deployer"}, "infra", time.Minute, t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring("create on serviceaccounts/token")))
}

// In a Pod, a Stack without a ServiceAccount acts as the controller through a
// kubeconfig naming the Pod's token file: no KUBERNETES_SERVICE_* for the runner,
// and the token itself is not copied.
func TestWriteInClusterKubeconfig(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	g.Expect(os.WriteFile(caFile, []byte("ca-bytes"), 0o600)).To(Succeed())
	tokenFile := filepath.Join(dir, "token")
	g.Expect(os.WriteFile(tokenFile, []byte("mounted-token-value"), 0o600)).To(Succeed())
	cfg := &rest.Config{Host: "https://10.96.0.1:443", BearerToken: "mounted-token-value", BearerTokenFile: tokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}}
	path := filepath.Join(dir, "data", "controller-kubeconfig")
	g.Expect(WriteInClusterKubeconfig(path, cfg)).To(Succeed())
	g.Expect(WriteInClusterKubeconfig(path, cfg)).To(Succeed(), "rewritten at the next start")

	raw, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("mounted-token-value"))
	kc, err := clientcmd.Load(raw)
	g.Expect(err).NotTo(HaveOccurred())
	rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Host).To(Equal("https://10.96.0.1:443"))
	g.Expect(rc.BearerTokenFile).To(Equal(tokenFile))
	g.Expect(rc.CAData).To(Equal([]byte("ca-bytes")))

	g.Expect(WriteInClusterKubeconfig(path, &rest.Config{Host: "https://h"})).To(MatchError(ContainSubstring("not in-cluster")))
}
