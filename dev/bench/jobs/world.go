package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/dev/internal/controllerproc"
	"github.com/stackpilot/stackpilot/dev/internal/postgres"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// runnerSA is the ServiceAccount of each tenant namespace that programs act
// as (--default-service-account), bound to `edit` there only.
const runnerSA = "stackpilot-runner"

// world is what both measurements run on, as the lead's Job e2e test sets it
// up: the one-node cluster with its Pod network, PostgreSQL on the Pod
// gateway as the state backend, the controller image (the runner is copied
// from it) and a user image with the pinned pulumi and YAML host, a Git
// server, and the controller as a process on this machine whose default
// executor is Job and whose runner channel listens on the Pod gateway.
type world struct {
	out             io.Writer
	start           time.Time
	root, bin, tmp  string
	c               *cluster.Cluster
	k               client.Client
	pg              *postgres.Server
	git             *testenv.GitServer
	prog            *testenv.Program // the Git server's TB
	userImage       string
	ctrlCfg         controllerproc.Config
	ctrl            *controllerproc.Process
	cleanups        []func()
	verbose, keep   bool
	imageCacheDir   string
	clusterUpFor    time.Duration
	imagesPushedFor time.Duration
}

func (w *world) logf(format string, args ...any) {
	fmt.Fprintf(w.out, "[%7.1fs] %s\n", time.Since(w.start).Seconds(), fmt.Sprintf(format, args...))
}

func (w *world) defer_(fn func()) { w.cleanups = append(w.cleanups, fn) }

// close undoes everything, newest first.
func (w *world) close() {
	for i := len(w.cleanups) - 1; i >= 0; i-- {
		w.cleanups[i]()
	}
	w.cleanups = nil
}

// lineLog prefixes the cluster's step lines with the benchmark's clock.
type lineLog struct{ w *world }

func (l lineLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.w.logf("%s", line)
	}
	return len(p), nil
}

// requirements is what this machine lacks to run the cluster and
// PostgreSQL (root, containerd, runc, the CNI plugins, Debian's postgresql);
// nil when it has all.
func requirements() error {
	return errors.Join(cluster.Requirements(), postgres.Requirements())
}

// setUp builds the world. The machine lock is taken first: one cluster at a
// time runs on this machine, and the tests' clusters take it too.
func (w *world) setUp(ctx context.Context, controllerArgs []string) (err error) {
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	if w.root, w.bin, err = testenv.Paths(); err != nil {
		return fmt.Errorf("%w (run the benchmarks from the Stackpilot repository: `make bench`)", err)
	}
	if err := testenv.RequireBinaries(w.bin, benchenv.Tools...); err != nil {
		return err
	}
	if w.tmp, err = os.MkdirTemp("", "stackpilot-bench-jobs-"); err != nil {
		return err
	}
	w.defer_(func() {
		if w.keep {
			w.logf("kept %s", w.tmp)
			return
		}
		_ = os.RemoveAll(w.tmp)
	})

	// The controller builds while the lock is awaited.
	binary := filepath.Join(w.tmp, "bin", "stackpilot-controller")
	built := make(chan error, 1)
	go func() { built <- controllerproc.Build(ctx, w.root, binary) }()

	t0 := time.Now()
	unlock, err := cluster.LockMachine(ctx, lineLog{w})
	if err != nil {
		<-built
		return err
	}
	w.defer_(unlock)
	if waited := time.Since(t0); waited > time.Second {
		w.logf("waited %s for the machine's cluster lock", waited.Round(time.Second))
	}
	if err := w.upCluster(ctx); err != nil {
		<-built
		return err
	}
	if err := w.pushImages(ctx); err != nil {
		<-built
		return err
	}
	if err := w.startBackendAndGit(ctx); err != nil {
		<-built
		return err
	}
	if err := <-built; err != nil {
		return err
	}
	return w.startController(ctx, binary, controllerArgs)
}

func (w *world) upCluster(ctx context.Context) error {
	log := lineLog{w}
	// A short directory (containerd's socket lives in it); first remove what
	// an earlier run, killed before its cleanup, left there.
	if err := cluster.CleanStale("/var/tmp/spc-*", log); err != nil {
		return fmt.Errorf("clean up earlier clusters: %w", err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "spc-")
	if err != nil {
		return err
	}
	t0 := time.Now()
	c, err := cluster.Up(ctx, cluster.Options{Dir: dir, Root: w.root, BinDir: w.bin, Log: log})
	if err != nil {
		logs := cluster.ComponentLogs(dir, 30)
		_ = cluster.Down(dir, nil)
		return fmt.Errorf("cluster up: %w\n%s", err, logs)
	}
	w.clusterUpFor = time.Since(t0)
	w.c = c
	w.defer_(func() {
		if err := c.Down(); err != nil {
			w.logf("cluster down: %v", err)
		}
	})
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	// client-go's default limit (5 requests/s, bursts of 10) would space the
	// latency's 20 ms polls 200 ms apart and the fleet's creates too.
	cfg.QPS, cfg.Burst = 500, 1000
	if w.k, err = client.New(cfg, client.Options{Scheme: scheme()}); err != nil {
		return err
	}
	return w.applyCRDs(ctx)
}

// applyCRDs applies the CRDs as `make install` does and waits until Stacks
// can be listed.
func (w *world) applyCRDs(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, filepath.Join(w.bin, "kubectl"), "--kubeconfig", w.c.Kubeconfig,
		"apply", "--server-side", "-f", filepath.Join(w.root, "config", "crd", "bases")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("apply the CRDs: %w\n%s", err, out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := w.k.List(ctx, &v1alpha1.StackList{})
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

// pushImages pushes the controller image (the runner is copied from it) and
// the user image (pulumi and the YAML host, no runner) into the cluster's
// registry. The layer cache is the benchmark's own, not bin/.image-cache,
// which the tests running beside it prune.
func (w *world) pushImages(ctx context.Context) error {
	t0 := time.Now()
	if w.imageCacheDir == "" {
		w.imageCacheDir = filepath.Join(os.TempDir(), "stackpilot-bench-jobs-image-cache")
	}
	runnerImage, err := cluster.PushControllerImage(ctx, w.root, []string{w.bin}, w.imageCacheDir, w.c.Registry, "bench")
	if err != nil {
		return fmt.Errorf("controller image: %w", err)
	}
	w.userImage, err = cluster.PushPulumiImage(ctx, []string{w.bin}, w.imageCacheDir, w.c.Registry, "bench")
	if err != nil {
		return fmt.Errorf("user image: %w", err)
	}
	w.imagesPushedFor = time.Since(t0)
	w.ctrlCfg.Args = append(w.ctrlCfg.Args, "--runner-image="+runnerImage)
	w.logf("images pushed in %s: runner %s, user %s", w.imagesPushedFor.Round(100*time.Millisecond), runnerImage, w.userImage)
	return nil
}

func (w *world) startBackendAndGit(ctx context.Context) (err error) {
	w.pg, err = postgres.Start(ctx, postgres.Options{ListenAddrs: []string{w.c.PodGateway}})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	w.defer_(w.pg.Stop)
	w.prog = &testenv.Program{}
	w.defer_(w.prog.Close)
	return benchenv.Try(func() { w.git = testenv.NewGitServer(w.prog) })
}

func (w *world) startController(ctx context.Context, binary string, extra []string) error {
	port, err := freePortOn(w.c.PodGateway)
	if err != nil {
		return err
	}
	var verbose io.Writer
	if w.verbose {
		verbose = os.Stderr
	}
	w.ctrlCfg.Binary, w.ctrlCfg.BinDir, w.ctrlCfg.Kubeconfig = binary, w.bin, w.c.Kubeconfig
	w.ctrlCfg.DataDir = filepath.Join(w.tmp, "controller-data")
	w.ctrlCfg.Verbose = verbose
	w.ctrlCfg.Args = append(w.ctrlCfg.Args,
		"--default-executor=Job",
		fmt.Sprintf("--runner-endpoint=https://%s:%d", w.c.PodGateway, port),
		fmt.Sprintf("--runner-bind-address=%s:%d", w.c.PodGateway, port),
		"--default-service-account="+runnerSA,
		// The latency's Local side runs in a tenant namespace too.
		"--allow-local-executor",
	)
	w.ctrlCfg.Args = append(w.ctrlCfg.Args, extra...)
	w.defer_(func() {
		if w.ctrl != nil {
			_ = w.ctrl.Stop()
		}
	})
	return w.restartController(ctx)
}

// restartController starts the controller afresh (stopping the running one):
// its VmHWM then covers only what follows.
func (w *world) restartController(ctx context.Context) error {
	if w.ctrl != nil {
		if err := w.ctrl.Stop(); err != nil {
			w.logf("stop the controller: %v", err)
		}
		w.ctrl = nil
	}
	w.ctrlCfg.LogPath = filepath.Join(w.tmp, fmt.Sprintf("controller-%d.log", time.Now().Unix()))
	p, err := controllerproc.Start(ctx, w.ctrlCfg)
	if err != nil {
		return fmt.Errorf("start the controller: %w", err)
	}
	w.ctrl = p
	w.logf("controller running: pid %d, log %s", p.Pid(), p.LogPath)
	return nil
}

// maxConcurrentJobs is the controller's own word for its limit: the value
// in its "starting" log line.
func (w *world) maxConcurrentJobs() string {
	logs, err := w.ctrl.Logs()
	if err != nil {
		return "?"
	}
	m := regexp.MustCompile(`"maxConcurrentJobs"\s*:\s*(\d+)`).FindStringSubmatch(logs)
	if m == nil {
		return "?"
	}
	return m[1]
}

// tenant makes a namespace that enforces the restricted Pod Security level,
// with the runner ServiceAccount allowed to edit that namespace only, and
// the passphrase Secret.
func (w *world) tenant(ctx context.Context, name string) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: runnerSA, Namespace: name}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: runnerSA + "-edit", Namespace: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: runnerSA, Namespace: name}},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: benchenv.PassphraseSecret, Namespace: name},
			StringData: map[string]string{"passphrase": benchenv.Passphrase},
		},
	}
	for _, o := range objs {
		if err := w.k.Create(ctx, o); err != nil {
			return fmt.Errorf("tenant %s: %w", name, err)
		}
	}
	return nil
}

// stack is a Stack of the program in repo/dir on PostgreSQL, its ConfigMap
// named cm; executor "Job" runs in the user image on the Pod network.
func (w *world) stack(ns, name, repo, dir, cm, executor string) *v1alpha1.Stack {
	cfg := map[string]apiextensionsv1.JSON{
		"namespace":     {Raw: []byte(strconv.Quote(ns))},
		"configMapName": {Raw: []byte(strconv.Quote(cm))},
	}
	rs := &v1alpha1.RunnerSpec{Executor: executor}
	if executor == v1alpha1.ExecutorJob {
		rs.Image = w.userImage
		// No kube-proxy here: the Pod reaches the API server at the
		// gateway (dev/internal/cluster's package doc).
		rs.PodTemplate = &v1alpha1.RunnerPodTemplate{Spec: &v1alpha1.RunnerPodSpec{Env: w.c.PodNetworkEnv()}}
	}
	return &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{
				Git: &v1alpha1.GitSource{URL: w.git.URL(repo), Ref: &v1alpha1.GitRef{Branch: branch}},
				Dir: dir,
			},
			// The Pods reach it at the gateway; so does a Local runner.
			Backend:         w.pg.URLAt(w.c.PodGateway),
			SecretsProvider: &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: benchenv.PassphraseSecret}},
			Config:          cfg,
			Runner:          rs,
			Interval:        metav1.Duration{Duration: 24 * time.Hour},
			RetryInterval:   &metav1.Duration{Duration: 5 * time.Second},
			Timeout:         &metav1.Duration{Duration: 10 * time.Minute},
		},
	}
}

// commit adds a commit to repo's branch whose tree is exactly files.
func (w *world) commit(repo string, files map[string]string, message string) (hash string, err error) {
	err = benchenv.Try(func() { hash = w.git.Commit(w.prog, repo, branch, files, message) })
	return hash, err
}

// freePortOn is a TCP port free on host now.
func freePortOn(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
