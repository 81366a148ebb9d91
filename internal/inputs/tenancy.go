package inputs

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/serror"
)

// Tenancy: the program of a Stack acts on the cluster as a ServiceAccount of the
// Stack's namespace, not as the controller. For each operation the controller
// asks the API server for a short-lived token of that ServiceAccount
// (TokenRequest) and writes a kubeconfig holding it into the operation's private
// directory; the runner's environment points KUBECONFIG at that file and holds
// nothing that leads to the controller's own credentials.
//
// Why KUBECONFIG and nothing else: without a `kubernetes:kubeconfig` config
// value, the Kubernetes provider loads client-go's default rules ($KUBECONFIG,
// else ~/.kube/config) through a deferred loader that falls back to the
// in-cluster config (the Pod's mounted token) when KUBERNETES_SERVICE_HOST and
// _PORT are set and the loaded kubeconfig is empty. So the runner gets neither
// variable (see cmd/controller's executor Env) and a complete kubeconfig.

// Tenancy says which identity programs act as on the cluster.
type Tenancy struct {
	// RESTConfig is the controller's connection: its server URL and CA go into
	// each operation's kubeconfig (its credentials never do).
	RESTConfig *rest.Config
	// DefaultServiceAccount is used for Stacks without spec.serviceAccountName;
	// empty means such Stacks act as the controller.
	DefaultServiceAccount string
	// OwnClusterEnv is what a program acting as the controller gets to find the
	// cluster: KUBECONFIG naming the controller's kubeconfig or, in a Pod, one
	// that names the Pod's token file (WriteInClusterKubeconfig). It is never
	// given to a program that acts as a ServiceAccount.
	OwnClusterEnv map[string]string
}

const (
	// tokenMargin is added to the operation's timeout: the token must outlive the
	// operation, its kill grace and the provider's last calls.
	tokenMargin = 5 * time.Minute
	// minTokenTTL is the shortest expiration the API server accepts.
	minTokenTTL = 10 * time.Minute
	// maxTokenTTL bounds the token whatever the timeout: spec.timeout has no
	// maximum, and "timeout: 8760h" must not mint a year-long credential that
	// outlives the operation (a program may have copied it anywhere). Two
	// hours is four times the default timeout (30m); the API server's own
	// --service-account-max-token-expiration may shorten it further. An
	// operation that runs past it gets 401s from the cluster, classified as an
	// authentication failure: set a shorter timeout, or split the program.
	maxTokenTTL = 2 * time.Hour
	// kubeconfigFile is the kubeconfig's name in the operation directory.
	kubeconfigFile = "kubeconfig"
)

// resolveServiceAccount sets the ServiceAccount the program acts as and checks
// that it exists, so that a missing one is a clear wait, retried, instead of an
// operation that fails.
func (r *Resolver) resolveServiceAccount(ctx context.Context, stack *v1alpha1.Stack, in *Inputs) error {
	field := "spec.serviceAccountName"
	in.ServiceAccount = stack.Spec.ServiceAccountName
	if in.ServiceAccount == "" {
		in.ServiceAccount = r.DefaultServiceAccount
		field = "the controller's --default-service-account"
	}
	if in.ServiceAccount == "" {
		return nil // the controller's own identity
	}
	var sa corev1.ServiceAccount
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: in.ServiceAccount}, &sa)
	if apierrors.IsNotFound(err) {
		return serror.Waiting(v1alpha1.ServiceAccountNotFoundReason,
			"%s: ServiceAccount %s not found in namespace %s: create it, with RBAC for what the program manages",
			field, in.ServiceAccount, stack.Namespace)
	}
	if err != nil {
		return serror.Transient(v1alpha1.ServiceAccountNotFoundReason, fmt.Errorf("%s: read ServiceAccount %s: %w", field, in.ServiceAccount, err))
	}
	return nil
}

// Env is the environment of one operation: the resolved inputs' Env plus
// how to reach the cluster. With a ServiceAccount, KUBECONFIG names a kubeconfig
// written into dir holding a fresh token for it (it wins over an env entry of
// the spec), and the token is added to the values scrubbed from messages.
// Without one, the controller's own cluster variables are passed (the program
// acts as the controller).
//
// timeout is the operation's: the token outlives it (requestToken).
func (t Tenancy) Env(ctx context.Context, c client.Client, in *Inputs, namespace string, timeout time.Duration, dir string) (map[string]string, error) {
	sa := in.ServiceAccount
	if sa == "" {
		// As before tenancy: the spec's env may point elsewhere and wins.
		env := maps.Clone(t.OwnClusterEnv)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, in.Env)
		return env, nil
	}
	env := maps.Clone(in.Env)
	if env == nil {
		env = map[string]string{}
	}
	if t.RESTConfig == nil {
		return nil, fmt.Errorf("ServiceAccount %s: the controller has no REST config to build a kubeconfig from", sa)
	}
	token, err := requestToken(ctx, c, namespace, sa, timeout)
	if err != nil {
		return nil, err
	}
	in.Secrets = append(in.Secrets, token)
	path := filepath.Join(dir, kubeconfigFile)
	if err := writeKubeconfig(path, t.RESTConfig, &clientcmdapi.AuthInfo{Token: token}, namespace); err != nil {
		return nil, fmt.Errorf("ServiceAccount %s: write the operation's kubeconfig: %w", sa, err)
	}
	env["KUBECONFIG"] = path
	return env, nil
}

// requestToken asks for a token of ServiceAccount ns/name valid for the
// operation's timeout plus a margin, within [minTokenTTL, maxTokenTTL].
func requestToken(ctx context.Context, c client.Client, ns, name string, timeout time.Duration) (string, error) {
	ttl := min(max(timeout+tokenMargin, minTokenTTL), maxTokenTTL)
	seconds := int64(ttl / time.Second)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("request a token for ServiceAccount %s/%s (the controller needs create on serviceaccounts/token): %w", ns, name, err)
	}
	if tr.Status.Token == "" {
		return "", fmt.Errorf("request a token for ServiceAccount %s/%s: the API server returned none", ns, name)
	}
	return tr.Status.Token, nil
}

// WriteInClusterKubeconfig writes, for a controller that runs in a Pod, a
// kubeconfig that acts as the controller: its API server and CA, and the path of
// its mounted token (tokenFile, re-read as the kubelet rotates it; the token
// itself is not copied). Programs of Stacks without a ServiceAccount get it, so
// that no runner ever needs KUBERNETES_SERVICE_HOST/_PORT (which would also turn
// their values into "secrets" scrubbed from every message).
func WriteInClusterKubeconfig(path string, cfg *rest.Config) error {
	if cfg.BearerTokenFile == "" {
		return fmt.Errorf("the controller's REST config has no token file: not in-cluster")
	}
	_ = os.Remove(path) // from an earlier start
	return writeKubeconfig(path, cfg, &clientcmdapi.AuthInfo{TokenFile: cfg.BearerTokenFile}, "")
}

// writeKubeconfig writes a kubeconfig for the API server of cfg that
// authenticates with auth only (never cfg's credentials) and selects namespace.
// The file is created exclusively with mode 0600: it may hold a credential.
func writeKubeconfig(path string, cfg *rest.Config, auth *clientcmdapi.AuthInfo, namespace string) error {
	server := cfg.Host
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return fmt.Errorf("read the API server's CA: %w", err)
		}
	}
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"cluster": {
			Server:                   server,
			CertificateAuthorityData: ca,
			TLSServerName:            cfg.ServerName,
			InsecureSkipTLSVerify:    cfg.Insecure,
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"stack": auth},
		Contexts:       map[string]*clientcmdapi.Context{"stack": {Cluster: "cluster", AuthInfo: "stack", Namespace: namespace}},
		CurrentContext: "stack",
	}
	data, err := clientcmd.Write(kc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
