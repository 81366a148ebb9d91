package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/dev/internal/controllerproc"
	"github.com/stackpilot/stackpilot/dev/internal/postgres"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// jobFixture is the Job executor's world: the one-node cluster with its Pod
// network, PostgreSQL on the Pod gateway as the state backend, the
// controller image (which the runner is copied from), a user image with the
// pinned pulumi and YAML host and no runner, a Git server, and the
// controller as a process on this machine whose default executor is Job and
// whose runner channel listens on the Pod gateway.
type jobFixture struct {
	t         *testing.T
	c         *testenv.Cluster
	k         client.Client
	pg        *postgres.Server
	git       *testenv.GitServer
	userImage string
	pause     string
	ctrlCfg   controllerproc.Config
	ctrl      *controllerproc.Process
	ns        string // a tenant namespace that enforces the restricted level
}

const runnerSA = "stackpilot-runner"

func newJobFixture(t *testing.T) *jobFixture {
	ctrllog.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	f := &jobFixture{t: t, c: testenv.StartCluster(t, scheme)}
	f.k = f.c.Client
	g := NewWithT(t)
	ctx := context.Background()
	c := f.c

	// The CRDs, as `make install` would apply them.
	out, err := exec.CommandContext(ctx, c.Kubectl, "--kubeconfig", c.Kubeconfig, "apply", "--server-side",
		"-f", filepath.Join(c.Root, "config", "crd", "bases")).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Eventually(func() error {
		return f.k.List(ctx, &v1alpha1.StackList{})
	}, time.Minute, time.Second).Should(Succeed())

	f.pg, err = postgres.Start(ctx, postgres.Options{ListenAddrs: []string{c.PodGateway}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(f.pg.Stop)

	cache := filepath.Join(c.BinDir, ".image-cache")
	runnerImage, err := cluster.PushControllerImage(ctx, c.Root, []string{c.BinDir}, cache, c.Registry, "job-e2e")
	g.Expect(err).NotTo(HaveOccurred())
	f.userImage, err = cluster.PushPulumiImage(ctx, []string{c.BinDir}, cache, c.Registry, "job-e2e")
	g.Expect(err).NotTo(HaveOccurred())
	f.pause = c.Registry + "/" + cluster.PauseRepository + ":" + cluster.PauseTag

	f.git = testenv.NewGitServer(t)

	binary := filepath.Join(t.TempDir(), "stackpilot-controller")
	g.Expect(controllerproc.Build(ctx, c.Root, binary)).To(Succeed())
	port, err := freePortOn(c.PodGateway)
	g.Expect(err).NotTo(HaveOccurred())
	f.ctrlCfg = controllerproc.Config{
		Binary:     binary,
		BinDir:     c.BinDir,
		Kubeconfig: c.Kubeconfig,
		DataDir:    filepath.Join(t.TempDir(), "data"),
		Args: []string{
			"--default-executor=Job",
			"--runner-image=" + runnerImage,
			fmt.Sprintf("--runner-endpoint=https://%s:%d", c.PodGateway, port),
			fmt.Sprintf("--runner-bind-address=%s:%d", c.PodGateway, port),
			"--default-service-account=" + runnerSA,
			"--graceful-shutdown-timeout=60s",
		},
	}
	f.startController()
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := f.ctrl.Logs()
			t.Logf("controller log:\n%s", cluster.Tail(logs, 120))
		}
		_ = f.ctrl.Stop()
	})

	f.ns = f.tenant("tenant-a")
	return f
}

func (f *jobFixture) startController() {
	p, err := controllerproc.Start(context.Background(), f.ctrlCfg)
	if err != nil {
		f.t.Fatalf("start the controller: %v", err)
	}
	f.ctrl = p
}

// tenant makes a namespace that enforces the restricted Pod Security
// level, with the runner ServiceAccount allowed to edit that namespace
// only, and the passphrase Secret.
func (f *jobFixture) tenant(name string) string {
	g := NewWithT(f.t)
	ctx := context.Background()
	g.Expect(f.k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})).To(Succeed())
	g.Expect(f.k.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: runnerSA, Namespace: name}})).To(Succeed())
	g.Expect(f.k.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: runnerSA + "-edit", Namespace: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: runnerSA, Namespace: name}},
	})).To(Succeed())
	g.Expect(f.k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pulumi-passphrase", Namespace: name},
		StringData: map[string]string{"passphrase": passphrase},
	})).To(Succeed())
	return name
}

// jobProgram writes a ConfigMap; with slow, also a Deployment whose Pod is
// Ready only after 40 s, so that an up lasts long enough to be cut.
func jobProgram(color string, slow bool) string {
	if !slow {
		return slowJobProgram(color, 0)
	}
	return slowJobProgram(color, 40)
}

// slowJobProgram is jobProgram whose up, with readyAfter > 0, also waits
// that many seconds for a Deployment to be ready.
func slowJobProgram(color string, readyAfter int) string {
	p := `name: job-e2e
runtime: yaml
config:
  namespace: {type: string}
  image: {type: string}
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata: {name: settings, namespace: "${namespace}"}
      data: {color: ` + color + `}
`
	if readyAfter > 0 {
		p += `  slow:
    type: kubernetes:apps/v1:Deployment
    properties:
      # An up killed mid-way applied fields under its own field manager,
      # which its state never recorded; the next up takes them over.
      metadata: {name: slow, namespace: "${namespace}", annotations: {pulumi.com/patchForce: "true"}}
      spec:
        replicas: 1
        selector: {matchLabels: {app: slow}}
        template:
          metadata: {labels: {app: slow, color: ` + color + `}}
          spec:
            terminationGracePeriodSeconds: 1
            securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
            containers:
              - name: pause
                image: "${image}"
                securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
                readinessProbe:
                  exec: {command: [/pause, -sleep=1ms]}
                  initialDelaySeconds: ` + strconv.Itoa(readyAfter) + `
                  periodSeconds: 1
`
	}
	return p
}

// stack is a Job Stack of the tenant's, from the Git repository, on
// PostgreSQL, running in the user image.
func (f *jobFixture) stack(name, repo string, mutate ...func(*v1alpha1.Stack)) *v1alpha1.Stack {
	s := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{
				Git: &v1alpha1.GitSource{URL: f.git.URL(repo), Ref: &v1alpha1.GitRef{Branch: "main"}},
				Dir: "app",
			},
			Backend:         f.pg.URLAt(f.c.PodGateway),
			SecretsProvider: &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: "pulumi-passphrase"}},
			Config: map[string]apiextensionsv1.JSON{
				"namespace":                         {Raw: []byte(fmt.Sprintf("%q", f.ns))},
				"image":                             {Raw: []byte(fmt.Sprintf("%q", f.pause))},
				"kubernetes:enableConfigMapMutable": {Raw: []byte(`true`)},
			},
			Runner: &v1alpha1.RunnerSpec{
				Image: f.userImage,
				// No kube-proxy here: the Pod reaches the API server at
				// the gateway (dev/internal/cluster's package doc).
				PodTemplate: &v1alpha1.RunnerPodTemplate{Spec: &v1alpha1.RunnerPodSpec{Env: f.c.PodNetworkEnv()}},
			},
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 5 * time.Second},
			Timeout:       &metav1.Duration{Duration: 10 * time.Minute},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	if err := f.k.Create(context.Background(), s); err != nil {
		f.t.Fatalf("create Stack %s: %v", name, err)
	}
	return s
}

func (f *jobFixture) get(g Gomega, key client.ObjectKey) *v1alpha1.Stack {
	s := &v1alpha1.Stack{}
	g.Expect(f.k.Get(context.Background(), key, s)).To(Succeed())
	return s
}

func (f *jobFixture) requestReconcile(key client.ObjectKey) {
	f.request(key, time.Now().Format(time.RFC3339Nano))
}

// requestDriftCheck asks for a reconcile with a drift check, as
// `stackpilot drift` does.
func (f *jobFixture) requestDriftCheck(key client.ObjectKey) {
	f.request(key, v1alpha1.DriftCheckRequestPrefix+time.Now().Format(time.RFC3339Nano))
}

func (f *jobFixture) request(key client.ObjectKey, value string) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, value)
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := f.k.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		f.t.Fatal(err)
	}
}

func (f *jobFixture) patchSpec(key client.ObjectKey, mutate func(*v1alpha1.Stack)) {
	NewWithT(f.t).Eventually(func() error {
		s := &v1alpha1.Stack{}
		if err := f.k.Get(context.Background(), key, s); err != nil {
			return err
		}
		mutate(s)
		return f.k.Update(context.Background(), s)
	}, time.Minute, time.Second).Should(Succeed())
}

// waitReady waits for Ready at revision (a commit SHA; "" any).
func (f *jobFixture) waitReady(key client.ObjectKey, revision string) *v1alpha1.Stack {
	f.t.Helper()
	var last *v1alpha1.Stack
	ok := NewWithT(f.t).Eventually(func(g Gomega) {
		s := f.get(g, key)
		last = s
		g.Expect(conditions.IsReady(s)).To(BeTrue(), readyOf(s))
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		if revision != "" {
			g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(revision))
		}
	}, 8*time.Minute, time.Second).Should(Succeed())
	if !ok {
		f.t.Fatalf("Stack %s not Ready: %s\n%s\nPods: %s", key, readyOf(last), stackStatus(f.k, key), f.c.PodsSummary(context.Background(), key.Namespace))
	}
	return last
}

func readyOf(s *v1alpha1.Stack) string {
	if s == nil {
		return "<no Stack>"
	}
	c := conditions.Get(s, v1alpha1.ReadyCondition)
	if c == nil {
		return "<no Ready condition>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// noRunnerLeft waits until no Job and no runner Pod is left in ns.
func (f *jobFixture) noRunnerLeft(ns string) {
	f.t.Helper()
	runner := client.MatchingLabels{"app.kubernetes.io/component": "runner"}
	NewWithT(f.t).Eventually(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(f.k.List(context.Background(), &jobs, client.InNamespace(ns), runner)).To(Succeed())
		g.Expect(jobs.Items).To(BeEmpty(), "Jobs left")
		var pods corev1.PodList
		g.Expect(f.k.List(context.Background(), &pods, client.InNamespace(ns), runner)).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "runner Pods left")
	}, 2*time.Minute, time.Second).Should(Succeed())
}

// runnerPod waits for the running runner Pod of the Stack's current operation.
func (f *jobFixture) runnerPod(key client.ObjectKey) *corev1.Pod {
	f.t.Helper()
	var pod *corev1.Pod
	NewWithT(f.t).Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(f.k.List(context.Background(), &pods, client.InNamespace(key.Namespace),
			client.MatchingLabels{"app.kubernetes.io/component": "runner"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
		pod = &pods.Items[0]
	}, 4*time.Minute, time.Second).Should(Succeed())
	return pod
}

// waitSlowStarted waits until the up of the slow program has created its
// Deployment (with color): the up is then waiting for it to be ready.
func (f *jobFixture) waitSlowStarted(color string) {
	f.t.Helper()
	NewWithT(f.t).Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(f.k.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "slow"}, &d)).To(Succeed())
		g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("color", color))
	}, 5*time.Minute, time.Second).Should(Succeed())
}

func historyOf(s *v1alpha1.Stack, revision string) []string {
	var out []string
	for _, h := range s.Status.History {
		if revision == "" || strings.HasSuffix(h.Revision, revision) {
			out = append(out, fmt.Sprintf("%s %s", h.Type, h.Outcome))
		}
	}
	return out
}

func (f *jobFixture) color() string {
	var cm corev1.ConfigMap
	if err := f.k.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "settings"}, &cm); err != nil {
		return "<" + err.Error() + ">"
	}
	return cm.Data["color"]
}

// TestJobExecutor runs Stacks with the Job executor in the one-node
// cluster: each operation in its own Pod in the Stack's namespace, admitted
// under the restricted level, from a user image that has no runner, with
// the state in PostgreSQL. Its steps share the cluster and go in order.
func TestJobExecutor(t *testing.T) {
	f := newJobFixture(t)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: f.ns, Name: "app"}
	var commit string
	// step runs a subtest whose failures, also the fixture's, end it alone.
	step := func(name string, fn func(t *testing.T, g *WithT)) {
		t.Run(name, func(t *testing.T) {
			parent := f.t
			f.t = t
			defer func() { f.t = parent }()
			fn(t, NewWithT(t))
		})
	}

	step("up, drift check, destroy-ready", func(t *testing.T, g *WithT) {
		commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": jobProgram("blue", false)}, "blue")
		f.stack("app", "infra", func(s *v1alpha1.Stack) {
			s.Spec.DestroyOnDelete = true
			s.Spec.DriftDetection = &v1alpha1.DriftDetection{Mode: v1alpha1.DriftDetect, Interval: &metav1.Duration{Duration: time.Hour}}
		})
		s := f.waitReady(key, commit)
		g.Expect(f.color()).To(Equal("blue"))
		g.Expect(historyOf(s, commit)).To(ContainElement("up succeeded"))
		g.Expect(s.Status.History[0].Changes.Create).To(BeEquivalentTo(2), "the counts the Pod reported (the stack and the ConfigMap)")
		// The engine log came back from the Pod over the runner channel, to
		// where `stackpilot logs` reads it.
		engineLog, err := os.ReadFile(filepath.Join(f.ctrlCfg.DataDir, "logs", string(s.UID), s.Status.History[0].ID+".log"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(engineLog)).To(ContainSubstring("kubernetes:core/v1:ConfigMap"))
		g.Expect(string(engineLog)).NotTo(ContainSubstring(passphrase))
		f.noRunnerLeft(f.ns)

		// Drift: the ConfigMap deleted behind Pulumi's back. (Changed, its
		// field would be another manager's, and the next apply would
		// conflict with it.)
		g.Expect(f.k.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "settings"}})).To(Succeed())
		f.requestDriftCheck(key)
		g.Eventually(func(g Gomega) {
			s := f.get(g, key)
			g.Expect(conditions.IsTrue(s, v1alpha1.DriftedCondition)).To(BeTrue(), "Drifted: %v", conditions.Get(s, v1alpha1.DriftedCondition))
		}, operationWait, time.Second).Should(Succeed())
		f.noRunnerLeft(f.ns)
	})

	step("manual approval, then apply", func(t *testing.T, g *WithT) {
		f.patchSpec(key, func(s *v1alpha1.Stack) {
			s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
			s.Spec.DriftDetection = nil
			// The ConfigMap the drift check found deleted: refreshed first,
			// the plan makes it again.
			s.Spec.Refresh = true
		})
		commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": jobProgram("green", false)}, "green")
		f.requestReconcile(key)
		var planID string
		g.Eventually(func(g Gomega) {
			s := f.get(g, key)
			g.Expect(s.Status.PendingPlan).NotTo(BeNil(), "no plan: %s", readyOf(s))
			g.Expect(s.Status.PendingPlan.Revision).To(HaveSuffix(commit))
			g.Expect(s.Status.CurrentOperation).To(BeNil())
			planID = s.Status.PendingPlan.ID
		}, operationWait, time.Second).Should(Succeed())
		g.Expect(f.color()).NotTo(Equal("green"), "applied before approval")
		// The Pod sent the inputs before the change with the plan (what
		// `stackpilot policy test --stack` reads), the passphrase nowhere.
		s := f.get(g, key)
		prior, err := os.ReadFile(filepath.Join(f.ctrlCfg.DataDir, "plans", string(s.UID), planID, "prior-inputs.json"))
		g.Expect(err).NotTo(HaveOccurred(), "the plan's prior inputs")
		g.Expect(string(prior)).To(ContainSubstring("kubernetes:core/v1:ConfigMap::settings"))
		g.Expect(string(prior)).NotTo(ContainSubstring(passphrase))
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ApproveAnnotation, planID)
		g.Expect(f.k.Patch(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app"}},
			client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		f.waitReady(key, commit)
		g.Expect(f.color()).To(Equal("green"))
		f.noRunnerLeft(f.ns)
	})

	step("a revision previewed in its Pod, on demand", func(t *testing.T, g *WithT) {
		// What a pull request's preview runs (`stackpilot preview
		// --revision`): under the Stack's executor, in a Pod, nothing
		// applied, its plan sent back.
		feature := f.git.Commit(t, "infra", "feature", map[string]string{"app/Pulumi.yaml": jobProgram("purple", false)}, "purple")
		req := fmt.Sprintf(`{"revision":"feature","requestedAt":%q}`, time.Now().UTC().Format(time.RFC3339Nano))
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.RevisionPreviewAnnotation: req}}})
		before := f.get(g, key)
		g.Expect(f.k.Patch(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app"}},
			client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		var answer *v1alpha1.RevisionPreview
		g.Eventually(func(g Gomega) {
			s := f.get(g, key)
			answer = s.Status.RevisionPreview
			g.Expect(answer).NotTo(BeNil())
			g.Expect(answer.Phase).NotTo(Equal(v1alpha1.PreviewRunning))
		}, operationWait, time.Second).Should(Succeed())
		g.Expect(answer.Phase).To(Equal(v1alpha1.PreviewSucceeded), answer.Message)
		g.Expect(answer.Commit).To(Equal(feature))
		g.Expect(answer.Changes.Update).To(BeEquivalentTo(1), "%+v", answer)
		_, err := os.Stat(filepath.Join(f.ctrlCfg.DataDir, "review-plans", string(before.UID), answer.Plan, "plan.json"))
		g.Expect(err).NotTo(HaveOccurred(), "the Pod sent the plan back")
		g.Expect(f.color()).To(Equal("green"), "a preview applied")
		// No operation of the Stack's ran the previewed commit (others may
		// have run meanwhile: a scheduled drift check of the applied one).
		for _, h := range f.get(g, key).Status.History {
			g.Expect(h.Revision).NotTo(HaveSuffix(feature), "a preview is no operation of the Stack's: %+v", h)
		}
		f.noRunnerLeft(f.ns)
	})

	step("rollback", func(t *testing.T, g *WithT) {
		f.patchSpec(key, func(s *v1alpha1.Stack) {
			s.Spec.Approval = nil
			s.Spec.Rollback = &v1alpha1.Rollback{Enabled: true, AfterFailures: 1}
		})
		f.waitReady(key, commit)
		bad := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": strings.Replace(jobProgram("red", false),
			"kubernetes:core/v1:ConfigMap", "kubernetes:core/v1:ConfigMapp", 1)}, "broken")
		f.requestReconcile(key)
		g.Eventually(func(g Gomega) {
			s := f.get(g, key)
			g.Expect(s.Status.Rollback).NotTo(BeNil(), "no rollback: %s", readyOf(s))
			g.Expect(s.Status.Rollback.FailedRevision).To(HaveSuffix(bad))
			g.Expect(string(s.Status.Rollback.Outcome)).To(Equal("succeeded"), readyOf(s))
		}, 6*time.Minute, time.Second).Should(Succeed())
		g.Expect(f.color()).To(Equal("green"))
		f.noRunnerLeft(f.ns)
		// Back to a program that works.
		f.patchSpec(key, func(s *v1alpha1.Stack) { s.Spec.Rollback = nil })
		commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": jobProgram("green", false)}, "fixed")
		f.requestReconcile(key)
		f.waitReady(key, commit)
	})

	step("runner Pod deleted mid-up", func(t *testing.T, g *WithT) {
		commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": jobProgram("yellow", true)}, "slow yellow")
		f.requestReconcile(key)
		f.waitSlowStarted("yellow")
		// Killed, as the OOM killer or a lost node ends it: no cancel, no
		// report, Pulumi's lock left in PostgreSQL. (A Pod deleted even
		// with grace 0 gets SIGTERM first, and Pulumi then releases it.)
		pod := f.runnerPod(key)
		killRunner(t, pod)
		s := f.waitReady(key, commit)
		hist := historyOf(s, commit)
		t.Logf("history of %s: %v", commit, hist)
		g.Expect(hist).To(ContainElement("up interrupted"), "the deleted Pod's up is not recorded interrupted")
		g.Expect(s.Status.History[0].Message).To(ContainSubstring("removed 1 stale lock"), "the dead Pod's lock was not cleared")
		g.Expect(hist).To(HaveEach(Not(Equal("up failed"))), "the retry found the stack locked")
		succeeded := 0
		for _, h := range hist {
			if h == "up succeeded" {
				succeeded++
			}
		}
		g.Expect(succeeded).To(Equal(1))
		g.Expect(f.color()).To(Equal("yellow"))
		f.noRunnerLeft(f.ns)
	})

	step("controller restarted mid-Job", func(t *testing.T, g *WithT) {
		commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": jobProgram("purple", true)}, "slow purple")
		f.requestReconcile(key)
		f.waitSlowStarted("purple")
		pod := f.runnerPod(key)
		g.Expect(f.ctrl.Stop()).To(Succeed())
		f.startController()
		s := f.waitReady(key, commit)
		hist := historyOf(s, commit)
		t.Logf("history of %s: %v", commit, hist)
		g.Expect(hist).To(Equal([]string{"up succeeded"}), "the Job was not adopted")
		g.Expect(f.color()).To(Equal("purple"))
		// The Job is deleted at once; its Pod goes with the garbage
		// collector, which a loaded machine makes wait.
		g.Eventually(func() bool {
			return apierrors.IsNotFound(f.k.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}, 2*time.Minute, time.Second).Should(BeTrue(), "the adopted Job's Pod is left")
		f.noRunnerLeft(f.ns)
	})

	step("two replicas: the leader killed, then stopped, mid-Job", func(t *testing.T, g *WithT) {
		commit = testHAFailover(t, f, key)
	})

	step("timeout", func(t *testing.T, g *WithT) {
		// The slow program's Deployment is Ready after 40 s: an up given
		// 30 s times out while Pulumi waits for it. The runner cancels
		// Pulumi (one SIGINT): it writes its checkpoint and releases its
		// lock, so the next up removes nothing.
		f.patchSpec(key, func(s *v1alpha1.Stack) { s.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Second} })
		slow := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": jobProgram("orange", true)}, "slow orange")
		f.requestReconcile(key)
		g.Eventually(func(g Gomega) {
			s := f.get(g, key)
			var timedOut []v1alpha1.OperationRecord
			for _, h := range s.Status.History {
				if strings.HasSuffix(h.Revision, slow) && h.Reason == v1alpha1.TimeoutReason {
					timedOut = append(timedOut, h)
				}
			}
			g.Expect(timedOut).NotTo(BeEmpty(), "no up of %s timed out: %v", slow, historyOf(s, slow))
			g.Expect(timedOut[0].Type).To(Equal(v1alpha1.OperationUp))
			g.Expect(timedOut[0].Outcome).To(Equal(v1alpha1.OutcomeFailed))
			g.Expect(timedOut[0].Message).To(ContainSubstring("timed out after 30s"))
		}, operationWait, time.Second).Should(Succeed())
		g.Expect(historyOf(f.get(g, key), slow)).NotTo(ContainElement("up interrupted"), "a timed-out up is not an interruption")

		f.patchSpec(key, func(s *v1alpha1.Stack) { s.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Minute} })
		commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": jobProgram("orange", false)}, "orange")
		f.requestReconcile(key)
		s := f.waitReady(key, commit)
		g.Expect(historyOf(s, commit)).To(Equal([]string{"up succeeded"}))
		g.Expect(s.Status.History[0].Message).NotTo(ContainSubstring("stale lock"), "the timed-out up left its lock")
		g.Expect(f.color()).To(Equal("orange"))
		f.noRunnerLeft(f.ns)
	})

	step("runner Pod pending past its deadline", func(t *testing.T, g *WithT) {
		// A Pod no node can take stays Pending; past
		// --runner-pending-timeout the operation fails with the
		// scheduler's reason, and its Job goes.
		args := f.ctrlCfg.Args
		f.ctrlCfg.Args = append(append([]string{}, args...), "--runner-pending-timeout=15s")
		restart := func() {
			g.Expect(f.ctrl.Stop()).To(Succeed())
			f.startController()
		}
		restart()
		defer func() { f.ctrlCfg.Args = args; restart() }()
		f.stack("unschedulable", "infra", func(s *v1alpha1.Stack) {
			s.Spec.Runner.PodTemplate.Spec.NodeSelector = map[string]string{"stackpilot.dev/no-such-node": "true"}
			s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
		})
		ukey := client.ObjectKey{Namespace: f.ns, Name: "unschedulable"}
		g.Eventually(func(g Gomega) {
			s := f.get(g, ukey)
			c := conditions.Get(s, v1alpha1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.RunnerPodFailedReason), readyOf(s))
			g.Expect(c.Message).To(ContainSubstring("RunnerPodFailed: Unschedulable: "))
			g.Expect(c.Message).To(ContainSubstring("still pending after 15s"))
			g.Expect(c.Message).To(ContainSubstring("didn't match Pod's node affinity/selector"))
		}, 3*time.Minute, time.Second).Should(Succeed())
		// Backing off (an hour here), the Stack has no Job and no Pod.
		g.Eventually(func(g Gomega) {
			var jobs batchv1.JobList
			g.Expect(f.k.List(ctx, &jobs, client.InNamespace(f.ns), client.MatchingLabels{"app.kubernetes.io/component": "runner"})).To(Succeed())
			for _, j := range jobs.Items {
				g.Expect(j.Name).NotTo(HavePrefix("unschedulable-"), "the failed operation's Job is left")
			}
		}, 2*time.Minute, time.Second).Should(Succeed())
		g.Expect(f.k.Delete(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "unschedulable"}})).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(f.k.Get(ctx, ukey, &v1alpha1.Stack{}))
		}, 2*time.Minute, time.Second).Should(BeTrue(), "the Stack was not deleted")
	})

	step("missing image", func(t *testing.T, g *WithT) {
		missing := f.c.Registry + "/stackpilot/nothing-here:1"
		start := time.Now()
		f.stack("missing", "infra", func(s *v1alpha1.Stack) { s.Spec.Runner.Image = missing })
		mkey := client.ObjectKey{Namespace: f.ns, Name: "missing"}
		g.Eventually(func(g Gomega) {
			s := f.get(g, mkey)
			c := conditions.Get(s, v1alpha1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.RunnerPodFailedReason), readyOf(s))
			g.Expect(c.Message).To(ContainSubstring(missing))
		}, 3*time.Minute, time.Second).Should(Succeed())
		t.Logf("RunnerPodFailed after %s", time.Since(start).Round(time.Second))
		g.Expect(f.k.Delete(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "missing"}})).To(Succeed())
	})

	step("policy pack the image cannot run", func(t *testing.T, g *WithT) {
		// The pack travels to the Pod in the operation's tree: the runner
		// there finds its PulumiPolicy.yaml, and no Node.js host in the
		// user image, and refuses before Pulumi starts.
		f.git.Commit(t, "packs", "main", map[string]string{
			"app/Pulumi.yaml":             jobProgram("green", false),
			"packs/org/PulumiPolicy.yaml": "name: org\nruntime: nodejs\n",
		}, "a TypeScript pack")
		f.stack("packed", "packs", func(s *v1alpha1.Stack) {
			s.Spec.PolicyPacks = []v1alpha1.PolicyPack{{Name: "org", Source: v1alpha1.StackSource{
				Git: &v1alpha1.GitSource{URL: f.git.URL("packs"), Ref: &v1alpha1.GitRef{Branch: "main"}}, Dir: "packs/org"}}}
		})
		pkey := client.ObjectKey{Namespace: f.ns, Name: "packed"}
		g.Eventually(func(g Gomega) {
			s := f.get(g, pkey)
			c := conditions.Get(s, v1alpha1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.PolicyPackFailedReason), readyOf(s))
			g.Expect(c.Message).To(ContainSubstring(`policy pack "org" (runtime nodejs): the runner's image has no pulumi-language-nodejs on PATH`))
		}, 3*time.Minute, time.Second).Should(Succeed())
		g.Expect(f.k.Delete(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "packed"}})).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(f.k.Get(ctx, pkey, &v1alpha1.Stack{}))
		}, 2*time.Minute, time.Second).Should(BeTrue(), "the Stack was not deleted")
	})

	step("hostile program", func(t *testing.T, g *WithT) { testHostileProgram(t, f) })

	step("destroy on delete", func(t *testing.T, g *WithT) {
		g.Expect(f.k.Delete(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app"}})).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(f.k.Get(ctx, key, &v1alpha1.Stack{}))
		}, 5*time.Minute, time.Second).Should(BeTrue(), "the Stack was not finalized")
		g.Expect(apierrors.IsNotFound(f.k.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "settings"}, &corev1.ConfigMap{}))).To(BeTrue(), "destroy left the ConfigMap")
		f.noRunnerLeft(f.ns)
	})
}

// killRunner SIGKILLs the runner of pod, PID 1 of its container's PID
// namespace, on this machine: every process of the container dies with it
// at once, Pulumi's CLI and its plugins included.
func killRunner(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	op := pod.Labels["stackpilot.dev/operation"]
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if len(args) > 2 && strings.HasSuffix(args[0], "stackpilot-runner") && args[1] == "runner" && args[2] == "pod" &&
			strings.Contains(string(data), "\x00"+op+"\x00") {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			if err != nil {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill the runner %d: %v", pid, err)
			}
			t.Logf("killed the runner of %s (pid %d)", op, pid)
			return
		}
	}
	t.Fatalf("no runner process of operation %s on this machine", op)
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

// operationWait bounds the wait for one operation in its Pod: a preview's
// Job starts a Pod, pulls the runner image from the loopback registry and
// starts Pulumi with the Kubernetes provider. On an idle machine that is
// well under a minute; with both cores busy (a fresh run's builds beside
// it) it took over five.
const operationWait = 10 * time.Minute
