package controller

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/jitter"
	"github.com/stackpilot/stackpilot/internal/logstore"
	"github.com/stackpilot/stackpilot/internal/plan"
)

// Config is what NewStackReconciler needs besides the manager.
type Config struct {
	// DataDir holds the artifact cache (artifacts/), per-operation work trees
	// (work/), the last applied inputs for rollbacks (inputs/), the plans that
	// wait for approval (plans/), the engine logs of recent operations
	// (logs/) and, by default, PULUMI_HOME (pulumi-home/).
	DataDir                 string
	DefaultBackend          string
	DefaultPassphraseSecret string
	PulumiCommand           string
	Executor                Executor
	// Tenancy chooses the identity programs act as; a nil RESTConfig is the
	// manager's.
	Tenancy Tenancy
	// DigestKeySecret names the Secret holding the inputs digest's key, in the
	// controller's namespace; it is created when absent.
	DigestKeySecret types.NamespacedName
	// Source resolves and fetches Git programs; a new one sharing resolutions
	// across Stacks is made when nil.
	Source *GitSource
	// OCI resolves and fetches OCI artifacts; a new one sharing resolutions
	// across Stacks, with ArtifactMaxSize, is made when nil.
	OCI *OCISource
	// ArtifactMaxSize bounds an OCI artifact's layer and the files extracted
	// from it, in bytes (0: srcoci.DefaultMaxSize).
	ArtifactMaxSize int64
	// ArtifactMaxFiles bounds the files of a Git checkout and of every tree
	// the artifact cache stores or copies (0: the defaults).
	ArtifactMaxFiles int
	// Flux fetches Flux sources' artifacts; made with ArtifactMaxSize when nil.
	Flux *FluxSource
	// AllowCrossNamespaceRefs lets a Stack follow a Flux source, or depend on
	// a Stack, in another namespace.
	AllowCrossNamespaceRefs bool
	// PodNamespace is the controller Pod's namespace; when empty, the
	// POD_NAMESPACE environment variable (set from the downward API).
	PodNamespace string
	// IntervalJitter spreads the requeues at spec.interval (the zero value:
	// none); see jitter.New.
	IntervalJitter jitter.Interval
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
	podNamespace := cfg.PodNamespace
	if podNamespace == "" {
		podNamespace = os.Getenv("POD_NAMESPACE")
	}
	// Every tree the cache stores or copies into a work directory is bounded
	// like the sources that fill it.
	store.Limits = artifact.Limits{MaxBytes: cfg.ArtifactMaxSize, MaxFiles: cfg.ArtifactMaxFiles}
	src := cfg.Source
	if src == nil {
		src = NewGitSource(store, cfg.ArtifactMaxSize, cfg.ArtifactMaxFiles)
	}
	oci := cfg.OCI
	if oci == nil {
		oci = NewOCISource(cfg.ArtifactMaxSize)
	}
	fluxSrc := cfg.Flux
	if fluxSrc == nil {
		fluxSrc = NewFluxSource(cfg.ArtifactMaxSize)
	}
	return &StackReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		//lint:ignore SA1019 core/v1 Events carry annotations (the revision, as Flux's do); events.k8s.io ones cannot.
		EventRecorder:           mgr.GetEventRecorderFor("stackpilot-controller"),
		Executor:                cfg.Executor,
		Source:                  src,
		OCI:                     oci,
		Flux:                    fluxSrc,
		AllowCrossNamespaceRefs: cfg.AllowCrossNamespaceRefs,
		Artifacts:               store,
		WorkDir:                 filepath.Join(cfg.DataDir, "work"),
		InputsDir:               filepath.Join(cfg.DataDir, "inputs"),
		OutcomesDir:             filepath.Join(cfg.DataDir, "outcomes"),
		Plans:                   plans,
		Logs:                    logs,
		PulumiHome:              filepath.Join(cfg.DataDir, "pulumi-home"),
		PulumiCommand:           cfg.PulumiCommand,
		DefaultBackend:          cfg.DefaultBackend,
		DefaultPassphraseSecret: cfg.DefaultPassphraseSecret,
		Tenancy:                 cfg.Tenancy,
		DigestKey:               &DigestKey{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Secret: cfg.DigestKeySecret},
		Host:                    host,
		PodNamespace:            podNamespace,
		IntervalJitter:          cfg.IntervalJitter,
	}, nil
}
