// Command stackpilot-controller runs the Stackpilot operator. Its `runner`
// subcommand is the runner process that the Local executor starts for each
// operation: the controller re-executes its own binary, so one image holds both.
// For the Job executor, `runner pod` is the runner in an operation's Pod, and
// `install-runner DIR` copies the binary there (runner_pod.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/controllers/alert"
	controllerpolicy "github.com/stackpilot/stackpilot/internal/controllers/policy"
	"github.com/stackpilot/stackpilot/internal/controllers/receiver"
	"github.com/stackpilot/stackpilot/internal/controllers/stack"
	"github.com/stackpilot/stackpilot/internal/dashboard"
	"github.com/stackpilot/stackpilot/internal/executor"
	"github.com/stackpilot/stackpilot/internal/inputs"
	"github.com/stackpilot/stackpilot/internal/jitter"
	"github.com/stackpilot/stackpilot/internal/notify"
	"github.com/stackpilot/stackpilot/internal/policy/analyzer"
	"github.com/stackpilot/stackpilot/internal/reaper"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/server"
)

func main() {
	// PID 1 of the image: reap orphans and forward signals to the real process.
	if code, ok := reaper.RunAsInit(); ok {
		os.Exit(code)
	}
	// Pulumi starts the policy analyzer (the runner hands it this binary
	// under the analyzer's name) with arguments of its own.
	if analyzer.Invoked() {
		os.Exit(analyzer.Main())
	}
	if len(os.Args) > 2 && os.Args[1] == "runner" && os.Args[2] == "pod" {
		os.Exit(runnerPod(os.Args[3:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "runner" {
		os.Exit(runner.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "install-runner" {
		os.Exit(installRunner(os.Args[2:]))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stackpilot-controller:", err)
		os.Exit(1)
	}
}

type flags struct {
	metricsAddr, probeAddr  string
	pprofAddr               string
	webhookAddr             string
	logsAddr, logsCertDir   string
	dashboardAddr           string
	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	watchLabelSelector      string
	dataDir                 string
	defaultBackend          string
	defaultPassphraseSecret string
	concurrentOperations    int
	concurrentPreviews      int
	previewPlanURL          string
	intervalJitterPercent   int
	pulumiCommand           string
	watchNamespace          string
	gracefulShutdownTimeout time.Duration
	artifactMaxSize         string
	artifactMaxFiles        int
	allowCrossNamespaceRefs bool
	// notifications
	notificationDenyInternal bool
	// tenancy and the inputs digest key
	defaultServiceAccount string
	digestKeySecret       string
	namespace             string
	// the Job executor (runner_flags.go)
	defaultExecutor      string
	runnerImage          string
	maxConcurrentJobs    int
	runnerPendingTimeout time.Duration
	runnerEndpoint       string
	runnerBindAddr       string
	runnerCertDir        string
	allowLocalExecutor   bool
}

func parseFlags() (*flags, *zap.Options) {
	f := &flags{}
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&f.pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof endpoints (heap, goroutines, CPU), for finding where memory or time goes; empty (the default) disables them. They reveal the process's memory: bind to localhost or keep the port unexposed.")
	flag.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	flag.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the controller's own).")
	flag.StringVar(&f.dataDir, "data-dir", "/data", "Directory for the artifact cache, work directories, PULUMI_HOME and the default backend.")
	flag.StringVar(&f.defaultBackend, "default-backend", "", "Backend URL for Stacks without spec.backend; {namespace} is replaced by the Stack's namespace, or /<namespace> is appended, and {name} (only beside {namespace}) by the Stack's name, a directory per Stack for large fleets on a file backend (default: file://<data-dir>/state/{namespace}).")
	flag.StringVar(&f.defaultPassphraseSecret, "default-passphrase-secret", "", "Name of a Secret (key \"passphrase\") in each Stack's namespace used when spec.secretsProvider is not set.")
	flag.IntVar(&f.concurrentOperations, "concurrent-operations", defaultConcurrency(), "How many Pulumi operations (and reconciles) run at once; the default is the number of CPUs this process may use (GOMAXPROCS, which in a container follows its CPU limit).")
	flag.IntVar(&f.intervalJitterPercent, "interval-jitter-percentage", jitter.DefaultPercentage, "Delay each Stack's requeue at spec.interval by up to this percent of it, so that Stacks created together do not wake together (0 disables it; at most 99). Never earlier than the interval, so Stacks on one repository share one ls-remote per interval. Retries are not jittered.")
	flag.StringVar(&f.artifactMaxSize, "artifact-max-size", "100Mi", "Largest artifact accepted: an OCI artifact's chosen layer (checked against the manifest before download, and while reading), a Flux source's tarball, the objects a Git clone fetches (stopped as they stream in), and the files extracted or checked out from any of them are each at most this size (a Kubernetes quantity: 100Mi, 1Gi, or bytes).")
	flag.IntVar(&f.artifactMaxFiles, "artifact-max-files", artifact.DefaultMaxFiles, "Most files (and links) a Git checkout, or any program tree the artifact cache stores or copies, may hold.")
	flag.BoolVar(&f.allowCrossNamespaceRefs, "allow-cross-namespace-refs", false, "Let a Stack name a Flux source (spec.source.sourceRef) or a Stack (spec.dependsOn, configFrom stackOutputs) in another namespace (refused by default, as in Flux).")
	flag.BoolVar(&f.notificationDenyInternal, strings.TrimPrefix(notify.DenyInternalFlag, "--"), false, "Refuse to send Alert notifications to loopback, link-local (169.254.0.0/16, where cloud metadata services answer; fe80::/10) and unspecified addresses, checked on the address dialled (after DNS). Redirects are never followed, with or without it.")
	flag.StringVar(&f.pulumiCommand, "pulumi", "", "Path of the pulumi CLI (default: pulumi from PATH).")
	flag.StringVar(&f.watchLabelSelector, "watch-label-selector", "", "Only serve the Stacks, Receivers and Alerts whose labels match this selector: one shard of a sharded installation, for example 'sharding.fluxcd.io/key in (shard1)' on a shard and '!sharding.fluxcd.io/key' on the main controller (default: all).")
	flag.StringVar(&f.leaderElectionID, "leader-election-id", "", "Name of the leader election Lease (default: "+defaultLeaderElectionID+", and with --watch-label-selector "+defaultLeaderElectionID+"-<a hash of the selector>, so that each shard elects its own leader).")
	flag.StringVar(&f.watchNamespace, "watch-namespace", "", "Only reconcile Stacks in this namespace, or these comma-separated namespaces (default: all).")
	flag.DurationVar(&f.gracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "On SIGTERM, how long a running operation may take to cancel gracefully (Pulumi gets SIGINT, writes its checkpoint and releases the stack lock) before its processes are killed; the controller exits at most ~15s after it.")
	flag.StringVar(&f.defaultServiceAccount, "default-service-account", "", "ServiceAccount, in each Stack's namespace, that programs act as when spec.serviceAccountName is not set (default: none, and such programs act as the controller itself).")
	flag.StringVar(&f.digestKeySecret, "digest-key-secret", "stackpilot-digest-key", "Name of the Secret, in the controller's namespace, holding the key of the inputs digest; created when absent.")
	flag.StringVar(&f.namespace, "namespace", "", "The controller's own namespace, for the digest key Secret (default: $POD_NAMESPACE, else --watch-namespace, else \"default\").")
	flag.StringVar(&f.defaultExecutor, "default-executor", v1alpha1.ExecutorLocal, "Where operations of Stacks without spec.runner.executor run: Local (a process of the controller, as the controller's user: for trusted programs and development) or Job (one Pod per operation in the Stack's namespace, as the Stack's ServiceAccount). The installed manifests pass Job.")
	flag.StringVar(&f.runnerImage, "runner-image", "", "Image of the runner Pods of Stacks without spec.runner.image: any image with pulumi and the program's language host on PATH (default: the controller's own image, read from its Pod, which holds pulumi and the YAML language host).")
	flag.IntVar(&f.concurrentPreviews, "concurrent-previews", 2, "How many pull-request previews (spec.previews) run at once, beside the Stacks' own operations; each also takes a slot of --concurrent-operations (Local) or --max-concurrent-jobs (Job) while it runs.")
	flag.StringVar(&f.previewPlanURL, "preview-plan-url-template", "", "The link to a pull request's reviewed plan in its comment and commit status, with {namespace}, {name} and {id} replaced (for example a page that serves GET /plans/<namespace>/<name>/<id>); empty: the comment names the `stackpilot plan --id` command instead.")
	flag.IntVar(&f.maxConcurrentJobs, "max-concurrent-jobs", defaultMaxConcurrentJobs, "How many runner Jobs (operations of Job Stacks) run at once; more wait for a free slot.")
	flag.DurationVar(&f.runnerPendingTimeout, "runner-pending-timeout", executor.DefaultPendingTimeout, "How long a runner Pod may stay Pending (unscheduled, pulling its image, initialising) before its operation fails with RunnerPodFailed and the Stack backs off; raise it where a cluster autoscaler adds nodes for runner Pods.")
	flag.StringVar(&f.runnerEndpoint, "runner-endpoint", "", "HTTPS URL at which runner Pods reach the controller to fetch their program and inputs and to report their result (default: https://stackpilot-runner.<the controller's namespace>.svc:9444).")
	flag.StringVar(&f.runnerCertDir, "runner-cert-dir", "", "Directory holding tls.crt and tls.key (and ca.crt when another CA signed them) for the runner endpoint (default: a self-signed certificate for the --runner-endpoint host, made once and kept, so that Pods of running Jobs still trust a restarted controller or a new leader: in a Pod, in the Secret stackpilot-runner-tls of the controller's namespace, shared by the replicas; outside a Pod, in the data dir).")
	flag.StringVar(&f.runnerBindAddr, "runner-bind-address", fmt.Sprintf(":%d", runnerPort), "Address of the HTTPS endpoint that runner Pods call (each request authenticated by its operation's credential).")
	flag.BoolVar(&f.allowLocalExecutor, "allow-local-executor", false, "With --default-executor=Job, let Stacks outside the controller's namespace set spec.runner.executor to Local (refused by default: a Local program runs inside the controller and can act as it, and where Job is the default every namespace editor may write Stacks).")
	opts := &zap.Options{}
	flag.StringVar(&f.webhookAddr, "webhook-bind-address", ":9292", "Address of the Receivers' webhook endpoint (/hook/...); 0 disables it.")
	flag.StringVar(&f.logsAddr, "logs-bind-address", ":9443", "Address of the HTTPS endpoint serving the engine logs of recent operations (/logs/..., what stackpilot logs reads) and the full plans that wait for approval (/plans/..., what stackpilot plan reads), each to callers who may get the Stack; 0 disables it.")
	flag.StringVar(&f.dashboardAddr, "dashboard-bind-address", "0", "Address of the HTTPS web dashboard (the fleet of Stacks, to each caller as their own Kubernetes identity may see it), with the certificate of --logs-cert-dir; 0 (the default) disables it.")
	flag.StringVar(&f.logsCertDir, "logs-cert-dir", "", "Directory holding tls.crt and tls.key for the logs endpoint (default: a self-signed certificate made at start).")
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	return f, opts
}

func run() error {
	f, zapOpts := parseFlags()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(zapOpts)))
	if t := f.previewPlanURL; t != "" && !strings.HasPrefix(t, "https://") && !strings.HasPrefix(t, "http://") {
		return fmt.Errorf("--preview-plan-url-template %q: want an http(s) URL, with {namespace}, {name} and {id} where the plan's are", t)
	}
	if f.concurrentPreviews < 1 {
		return errors.New("--concurrent-previews must be at least 1")
	}
	if f.concurrentOperations < 1 {
		return errors.New("--concurrent-operations must be at least 1")
	}
	intervalJitter, err := jitter.New(f.intervalJitterPercent)
	if err != nil {
		return fmt.Errorf("--interval-jitter-percentage: %w", err)
	}
	if f.gracefulShutdownTimeout <= 0 {
		return errors.New("--graceful-shutdown-timeout must be positive (the Pod's terminationGracePeriodSeconds must exceed it by 15s)")
	}
	artifactMaxSize, err := parseSize(f.artifactMaxSize)
	if err != nil {
		return fmt.Errorf("--artifact-max-size: %w", err)
	}
	if f.artifactMaxFiles < 1 {
		return errors.New("--artifact-max-files must be at least 1")
	}
	if err := checkExecutor(f.defaultExecutor); err != nil {
		return err
	}
	if f.runnerPendingTimeout <= 0 {
		return errors.New("--runner-pending-timeout must be positive, for example 5m")
	}
	if f.maxConcurrentJobs < 1 {
		return errors.New("--max-concurrent-jobs must be at least 1")
	}
	if f.runnerEndpoint == "" {
		f.runnerEndpoint = defaultRunnerEndpoint(f.ownNamespace())
	}
	if err := checkRunnerEndpoint(f.runnerEndpoint); err != nil {
		return err
	}
	dataDir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return err
	}
	watchSelector, err := parseWatchSelector(f.watchLabelSelector)
	if err != nil {
		return err
	}
	if f.defaultBackend == "" {
		f.defaultBackend = "file://" + filepath.Join(dataDir, "state") + "/{namespace}"
	}
	if err := inputs.CheckDefaultBackend(f.defaultBackend); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the runner: %w", err)
	}

	scheme := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	// The metrics port is plain HTTP and reachable by any Pod: it serves
	// metrics only. The full plans are served beside the engine logs, over
	// HTTPS, to whoever may get the Stack (server.Setup).
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        leaderElectionID(f.leaderElectionID, watchSelector),
		LeaderElectionNamespace: f.leaderElectionNamespace,
		// The process exits right after the manager stops, so the lease can be
		// released at once: a replacement Pod takes over without waiting it out.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr(managerShutdownTimeout(f.gracefulShutdownTimeout)),
	}
	mgrOpts.Cache = cacheOptions(watchSelector, f.watchNamespaces())
	restConfig := ctrl.GetConfigOrDie()
	mgr, err := newManager(restConfig, mgrOpts) // leader_election.go: the Lease's timings
	if err != nil {
		return err
	}
	ownEnv, err := ownClusterEnv(restConfig, dataDir)
	if err != nil {
		return err
	}
	runnerImg, err := runnerImage(context.Background(), mgr.GetAPIReader(), f.runnerImage, f.defaultExecutor)
	switch {
	case err != nil && f.defaultExecutor == v1alpha1.ExecutorJob:
		return err
	case err != nil:
		// Local is the default: only Stacks that ask for Job need the image,
		// and their operations fail saying it is missing; the controller
		// still serves the others.
		ctrl.Log.Error(err, "no default runner image: Job Stacks without spec.runner.image cannot run")
	}

	// Not the manager's client: it is used before the manager starts, and
	// what it reads (its own Pod, the runner certificate's Secret) must not
	// start a cache of every Pod or Secret.
	direct, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := setupLeaderLabel(mgr, direct, f.ownNamespace()); err != nil {
		return err
	}
	certSecret := types.NamespacedName{Namespace: f.ownNamespace(), Name: runnerCertSecretName(mgrOpts.LeaderElectionID)}
	jobs, err := jobExecutor(mgr, restConfig, f, dataDir, runnerImg, certSecret)
	if err != nil {
		return err
	}

	r, err := stack.NewStackReconciler(mgr, stack.Config{
		DataDir:                 dataDir,
		DefaultBackend:          f.defaultBackend,
		DefaultPassphraseSecret: f.defaultPassphraseSecret,
		PulumiCommand:           f.pulumiCommand,
		Tenancy: inputs.Tenancy{
			RESTConfig:            restConfig,
			DefaultServiceAccount: f.defaultServiceAccount,
			OwnClusterEnv:         ownEnv,
		},
		DigestKeySecret:         types.NamespacedName{Namespace: f.ownNamespace(), Name: f.digestKeySecret},
		IntervalJitter:          intervalJitter,
		ArtifactMaxSize:         artifactMaxSize,
		ArtifactMaxFiles:        f.artifactMaxFiles,
		AllowCrossNamespaceRefs: f.allowCrossNamespaceRefs,
		DefaultExecutor:         f.defaultExecutor,
		AllowLocalExecutor:      f.allowLocalExecutor,
		Shard:                   watchSelector,
		JobExecutor:             jobs,
		Executor: &executor.Local{
			Command:     []string{self, "runner"},
			WorkRoot:    filepath.Join(dataDir, "operations"),
			PulumiHome:  filepath.Join(dataDir, "pulumi-home"),
			Concurrency: f.concurrentOperations,
			CancelGrace: f.gracefulShutdownTimeout,
			// Nothing that leads to the controller's credentials: how a program
			// reaches the cluster is chosen per operation (inputs.Tenancy).
			Env: runnerBaseEnv(os.Environ()),
		},
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	allStacks, err := allStacksCache(mgr, mgrOpts, watchSelector)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(ctx, mgr, stack.Options{MaxConcurrentReconciles: reconcileWorkers(f), AllStacks: allStacks}); err != nil {
		return err
	}
	// Pull-request previews: their own queue and workers (spec.previews).
	previews := &stack.PreviewReconciler{StackReconciler: r, PlanURLTemplate: f.previewPlanURL}
	if err := previews.SetupWithManager(mgr, stack.PreviewOptions{MaxConcurrentReconciles: f.concurrentPreviews}); err != nil {
		return err
	}
	// Alerts: a separate watch on Stacks; delivery never holds a reconcile.
	if err := alert.NewReconciler(mgr, f.notificationDenyInternal).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := controllerpolicy.Setup(mgr); err != nil {
		return fmt.Errorf("policy controllers: %w", err)
	}
	if err := receiver.Setup(mgr, f.webhookAddr, r.GitResolver()); err != nil {
		return err
	}
	if err := server.Setup(mgr, f.logsAddr, f.logsCertDir, r.Logs, r.Plans, r.Reviews); err != nil {
		return err
	}
	if f.dashboardAddr != "0" && f.dashboardAddr != "" {
		cert, err := server.Certificate(f.logsCertDir)
		if err != nil {
			return fmt.Errorf("--logs-cert-dir: %w", err)
		}
		if err := dashboard.Setup(mgr, f.dashboardAddr, cert, r.Logs, r.Plans, r.Reviews); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "dataDir", dataDir, "concurrentOperations", f.concurrentOperations, "intervalJitterPercentage", f.intervalJitterPercent,
		"defaultServiceAccount", f.defaultServiceAccount, "digestKeySecret", f.ownNamespace()+"/"+f.digestKeySecret,
		"defaultExecutor", f.defaultExecutor, "runnerImage", runnerImg, "maxConcurrentJobs", f.maxConcurrentJobs,
		"runnerEndpoint", f.runnerEndpoint, "runnerBindAddress", f.runnerBindAddr,
		"watchLabelSelector", selectorString(watchSelector), "leaderElectionID", mgrOpts.LeaderElectionID)
	return mgr.Start(ctx)
}

// managerShutdownTimeout is how long the manager waits for reconciles on
// shutdown: the runners' cancel grace, then the final status patch of each
// cancelled operation, then a margin for the runner to write its result.
func managerShutdownTimeout(cancelGrace time.Duration) time.Duration {
	return cancelGrace + stack.FinalPatchTimeout + 5*time.Second
}

func ptr[T any](v T) *T { return &v }

// defaultConcurrency is the default of --concurrent-operations: one operation
// per CPU this process may use. A Pulumi operation is mostly CPU (the engine,
// the language host and the provider), so more at once only queue for the
// CPUs, and fewer leave them idle. GOMAXPROCS rather than NumCPU: since Go
// 1.25 it follows the cgroup CPU limit of a container (limits.cpu: "2" on a
// 16-core node gives 2, where NumCPU says 16), and it honours $GOMAXPROCS.
func defaultConcurrency() int {
	return max(1, runtime.GOMAXPROCS(0))
}

// watchNamespaces is --watch-namespace as a list (empty: all namespaces).
func (f *flags) watchNamespaces() []string {
	var out []string
	for _, ns := range strings.Split(f.watchNamespace, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// ownNamespace is where the controller keeps its own objects (the digest key).
func (f *flags) ownNamespace() string {
	first := ""
	if namespaces := f.watchNamespaces(); len(namespaces) > 0 {
		first = namespaces[0]
	}
	for _, ns := range []string{f.namespace, os.Getenv("POD_NAMESPACE"), first} {
		if ns != "" {
			return ns
		}
	}
	return "default"
}

// ownClusterEnv is how a program that acts as the controller (a Stack without
// a ServiceAccount) finds the cluster: the controller's own kubeconfig
// (controller-runtime's --kubeconfig flag, else $KUBECONFIG) or, in a Pod, a
// kubeconfig naming the Pod's token file. Never KUBERNETES_SERVICE_HOST/_PORT:
// the runner's environment has none (see controller.Tenancy).
func ownClusterEnv(cfg *rest.Config, dataDir string) (map[string]string, error) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if fl := flag.Lookup("kubeconfig"); fl != nil && fl.Value.String() != "" {
		kubeconfig = fl.Value.String()
	}
	if kubeconfig != "" {
		// The runner works in the operation's directory: relative paths would not resolve there.
		paths := filepath.SplitList(kubeconfig)
		for i, p := range paths {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			paths[i] = abs
		}
		return map[string]string{"KUBECONFIG": strings.Join(paths, string(os.PathListSeparator))}, nil
	}
	if cfg.BearerTokenFile == "" {
		return map[string]string{}, nil // e.g. ~/.kube/config, which the runner finds through HOME
	}
	path := filepath.Join(dataDir, "controller-kubeconfig")
	if err := inputs.WriteInClusterKubeconfig(path, cfg); err != nil {
		return nil, fmt.Errorf("kubeconfig for Stacks without a ServiceAccount: %w", err)
	}
	return map[string]string{"KUBECONFIG": path}, nil
}

// parseSize reads a Kubernetes quantity ("100Mi") as a positive byte count.
func parseSize(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: write it like 100Mi, 1Gi or 104857600", s)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive whole number of bytes", s)
	}
	return n, nil
}
