package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// kubeOptions are kubectl's connection flags, read the way kubectl reads
// them (clientcmd's loading rules: --kubeconfig, else $KUBECONFIG, a list,
// else ~/.kube/config; in-cluster when none), without k8s.io/cli-runtime.
type kubeOptions struct {
	kubeconfig string
	context    string
	namespace  string
	// allNamespaces is -A: verbs that list read every namespace.
	allNamespaces bool

	// loaded is built on first use: flags are parsed by then.
	loaded clientcmd.ClientConfig
}

func (o *kubeOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).")
	fs.StringVar(&o.context, "context", "", "The kubeconfig context to use (default: its current context).")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "The namespace (default: the context's namespace, else \"default\").")
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List across all namespaces (verbs that list, such as get stacks).")
}

func (o *kubeOptions) clientConfig() clientcmd.ClientConfig {
	if o.loaded == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.kubeconfig
		overrides := &clientcmd.ConfigOverrides{
			CurrentContext: o.context,
			Context:        clientcmdapi.Context{Namespace: o.namespace},
		}
		o.loaded = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	}
	return o.loaded
}

// RESTConfig is the connection to the cluster, for verbs that talk to it.
func (o *kubeOptions) RESTConfig() (*rest.Config, error) {
	cfg, err := o.clientConfig().ClientConfig()
	if err != nil {
		return nil, o.explain(err)
	}
	return cfg, nil
}

// Namespace is -n, else the context's namespace, else "default".
func (o *kubeOptions) Namespace() (string, error) {
	ns, _, err := o.clientConfig().Namespace()
	if err != nil {
		return "", o.explain(err)
	}
	return ns, nil
}

// Client is a controller-runtime client for Kubernetes' types and
// Stackpilot's (kubeScheme).
func (o *kubeOptions) Client() (client.Client, error) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: kubeScheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	return c, nil
}

// kubeScheme knows client-go's built-in types and stackpilot.dev/v1alpha1.
func kubeScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return scheme
}

// explain turns clientcmd's errors into ones that say what to do.
func (o *kubeOptions) explain(err error) error {
	if clientcmd.IsEmptyConfig(err) {
		return fmt.Errorf("no kubeconfig found: pass --kubeconfig FILE or set KUBECONFIG (or create ~/.kube/config)")
	}
	if o.context != "" {
		return fmt.Errorf("kubeconfig (context %q): %w; list the contexts with `kubectl config get-contexts`", o.context, err)
	}
	return fmt.Errorf("kubeconfig: %w", err)
}
