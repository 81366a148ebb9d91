package stack

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/jitter"
	"github.com/stackpilot/stackpilot/internal/logstore"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/source/flux"
	"github.com/stackpilot/stackpilot/internal/source/git"
	"github.com/stackpilot/stackpilot/internal/source/oci"
)

// Config is what NewStackReconciler needs besides the manager; the
// reconciler embeds it.
type Config struct {
	// DataDir holds the artifact cache (artifacts/), per-operation work trees
	// (work/), the last applied inputs for rollbacks (inputs/), the plans that
	// wait for approval (plans/), the engine logs of recent operations
	// (logs/) and, by default, PULUMI_HOME (pulumi-home/).
	DataDir string
	// DefaultBackend is used when spec.backend is empty; {namespace} is replaced
	// (or /<namespace> appended) so that namespaces never share state by accident.
	DefaultBackend string
	// DefaultPassphraseSecret names a Secret in the Stack's namespace holding the
	// passphrase when the spec names none.
	DefaultPassphraseSecret string
	// PulumiCommand is the pulumi binary the runner drives ("" = from PATH).
	PulumiCommand string
	Executor      Executor
	// JobExecutor runs the operations of Stacks whose executor is Job; nil
	// when this controller has no runner channel.
	JobExecutor JobExecutor
	// Tenancy chooses the identity programs act as (inputs.Tenancy); a nil
	// RESTConfig is the manager's.
	Tenancy Tenancy
	// DigestKeySecret names the Secret holding the inputs digest's key, in the
	// controller's namespace; it is created when absent.
	DigestKeySecret types.NamespacedName
	// Sources are the source kinds Stacks may use; sourceKinds() when nil.
	Sources source.Kinds
	// ArtifactMaxSize bounds an OCI artifact's layer, a Flux artifact, a Git
	// clone and the files extracted from them, in bytes (0: each kind's
	// default).
	ArtifactMaxSize int64
	// ArtifactMaxFiles bounds the files of a Git checkout and of every tree
	// the artifact cache stores or copies (0: the defaults).
	ArtifactMaxFiles int
	// AllowCrossNamespaceRefs lets spec.source.sourceRef name a source, and
	// spec.dependsOn and configFrom stackOutputs a Stack, in another
	// namespace (--allow-cross-namespace-refs).
	AllowCrossNamespaceRefs bool
	// PodNamespace is the controller Pod's namespace, where it looks for the
	// Pod of an interrupted operation; when empty, the POD_NAMESPACE
	// environment variable (set from the downward API), and empty outside a Pod.
	PodNamespace string
	// IntervalJitter delays each requeue at spec.interval by up to p % of it
	// (never earlier), so that Stacks created together do not wake together.
	// Retries and backoff waits are not jittered. The zero value adds none.
	IntervalJitter jitter.Interval
	// DefaultExecutor is where operations of Stacks without
	// spec.runner.executor run: v1alpha1.ExecutorLocal or ExecutorJob
	// (--default-executor; checked at start).
	DefaultExecutor string
	// AllowLocalExecutor lets Stacks of any namespace set
	// spec.runner.executor: Local where DefaultExecutor is Job
	// (--allow-local-executor); without it only the controller's namespace
	// (PodNamespace) may.
	AllowLocalExecutor bool
	// Shard is the --watch-label-selector this controller serves, nil when
	// it serves every Stack (shard.go).
	Shard labels.Selector
}

// sourceKinds are the source kinds a controller knows, reading Secrets and
// Flux sources with reader and storing into store. A new kind is one
// package under internal/source and one line here.
func sourceKinds(reader client.Reader, store *artifact.Store, cfg Config) source.Kinds {
	return source.Kinds{
		git.NewKind(reader, store, cfg.ArtifactMaxSize, cfg.ArtifactMaxFiles),
		oci.NewKind(reader, store, cfg.ArtifactMaxSize),
		flux.NewKind(reader, store, cfg.ArtifactMaxSize, cfg.AllowCrossNamespaceRefs),
	}
}

// NewStackReconciler wires a reconciler to a manager's clients.
func NewStackReconciler(mgr ctrl.Manager, cfg Config) (*StackReconciler, error) {
	for _, d := range []string{"artifacts", "work", "pulumi-home", "inputs", "outcomes"} {
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, d), 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	store, err := artifact.NewStore(filepath.Join(cfg.DataDir, "artifacts"))
	if err != nil {
		return nil, err
	}
	plans, err := plan.NewStore(filepath.Join(cfg.DataDir, "plans"))
	if err != nil {
		return nil, err
	}
	reviews, err := plan.NewStore(filepath.Join(cfg.DataDir, "review-plans"))
	if err != nil {
		return nil, err
	}
	logs, err := logstore.New(filepath.Join(cfg.DataDir, "logs"))
	if err != nil {
		return nil, err
	}
	if cfg.DigestKeySecret.Name == "" || cfg.DigestKeySecret.Namespace == "" {
		return nil, fmt.Errorf("the inputs digest key Secret needs a name and a namespace, got %q", cfg.DigestKeySecret)
	}
	if cfg.Tenancy.RESTConfig == nil {
		cfg.Tenancy.RESTConfig = mgr.GetConfig()
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("host name: %w", err)
	}
	if cfg.PodNamespace == "" {
		cfg.PodNamespace = os.Getenv("POD_NAMESPACE")
	}
	// Every tree the cache stores or copies into a work directory is bounded
	// like the sources that fill it.
	store.Limits = artifact.Limits{MaxBytes: cfg.ArtifactMaxSize, MaxFiles: cfg.ArtifactMaxFiles}
	if cfg.Sources == nil {
		cfg.Sources = sourceKinds(mgr.GetAPIReader(), store, cfg)
	}
	return &StackReconciler{
		Config:    cfg,
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		//lint:ignore SA1019 core/v1 Events carry annotations (the revision, as Flux's do); events.k8s.io ones cannot.
		EventRecorder: mgr.GetEventRecorderFor("stackpilot-controller"),
		Artifacts:     store,
		WorkDir:       filepath.Join(cfg.DataDir, "work"),
		InputsDir:     filepath.Join(cfg.DataDir, "inputs"),
		OutcomesDir:   filepath.Join(cfg.DataDir, "outcomes"),
		Plans:         plans,
		Reviews:       reviews,
		Logs:          logs,
		PulumiHome:    filepath.Join(cfg.DataDir, "pulumi-home"),
		DigestKey:     &DigestKey{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Secret: cfg.DigestKeySecret},
		Host:          host,
	}, nil
}

// GitResolver is the Git kind's resolver, whose listings a Receiver's push
// event invalidates; nil when the controller has no Git kind.
func (r *StackReconciler) GitResolver() *git.Resolver {
	for _, k := range r.Sources {
		if g, ok := k.(*git.Kind); ok {
			return g.Resolver
		}
	}
	return nil
}
