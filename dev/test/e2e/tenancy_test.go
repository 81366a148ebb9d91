package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// jwtPrefix starts every ServiceAccount token (a JWT's base64url header).
const jwtPrefix = "eyJhbGci"

// TestTenancyForbiddenThenGranted: a Stack whose ServiceAccount may not create
// the program's ConfigMap fails with the API server's forbidden message naming
// that ServiceAccount, and nothing is created; granting the ServiceAccount a
// Role makes the Stack Ready on its own retry. The program's processes never
// see the controller's kubeconfig, and the token file is gone afterwards.
func TestTenancyForbiddenThenGranted(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	createServiceAccount(t, f.ns, "deployer")
	f.start(t)
	watcher := watchRunnerEnv(t, f.ctrl.Pid())

	stack := f.stack("tenant", func(s *v1alpha1.Stack) { s.Spec.ServiceAccountName = "deployer" })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitNotReady(t, key, v1alpha1.AuthenticationFailedReason)
	user := "system:serviceaccount:" + f.ns + ":deployer"
	g.Expect(readyMessage(s)).To(ContainSubstring(`configmaps "app-settings" is forbidden: User "`+user+`" cannot`),
		"the API server's own message, naming the ServiceAccount: the token is that ServiceAccount's")
	// The newest finished operation: the retry may already be running (its
	// entry, first in the history, has no message yet).
	var finished *v1alpha1.OperationRecord
	for i := range s.Status.History {
		if s.Status.History[i].FinishedAt != nil {
			finished = &s.Status.History[i]
			break
		}
	}
	g.Expect(finished).NotTo(BeNil(), "no finished operation in %+v", s.Status.History)
	g.Expect(finished.Message).To(ContainSubstring("is forbidden"))
	var cm corev1.ConfigMap
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &cm)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing was created: %v", err)

	grant(t, f.ns, "deployer", "configmaps")
	s = waitApplied(t, key, f.commit)
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
	g.Expect(s.Status.Failures).To(BeZero())

	// No token anywhere the Stack's readers, or the controller's log, can see.
	statusJSON, err := jsonString(s.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statusJSON).NotTo(ContainSubstring(jwtPrefix))
	for _, e := range stackEvents(t, f.ns, stack.Name) {
		g.Expect(e).NotTo(ContainSubstring(jwtPrefix))
	}
	g.Expect(f.ctrl.Logs(t)).NotTo(ContainSubstring(jwtPrefix))

	// The token's kubeconfig went with the operation's directory.
	g.Expect(kubeconfigsUnder(t, f.dataDir)).To(BeEmpty())

	// What the runner and everything below it (the pulumi CLI, the YAML
	// language host, the Kubernetes provider) had in their environment.
	procs := watcher.stop()
	g.Expect(procs).To(HaveKey(ContainSubstring("pulumi-resource-kubernetes")), "the provider was seen: %v", keys(procs))
	g.Expect(procs).To(HaveKey(ContainSubstring(" runner ")), "the runner was seen: %v", keys(procs))
	for cmd, environ := range procs {
		g.Expect(environ).NotTo(HaveKey("KUBERNETES_SERVICE_HOST"), cmd)
		g.Expect(environ).NotTo(HaveKey("KUBERNETES_SERVICE_PORT"), cmd)
		for k, v := range environ {
			g.Expect(v).NotTo(ContainSubstring(env.Kubeconfig), "%s: %s names the controller's kubeconfig", cmd, k)
		}
		if strings.Contains(cmd, " runner ") {
			g.Expect(environ).NotTo(HaveKey("KUBECONFIG"), "the runner's own environment: %s", cmd)
			continue
		}
		// The Automation API runs some CLI commands (pulumi version) with the
		// runner's environment alone; the ones that reach the cluster have the
		// operation's kubeconfig.
		if strings.Contains(cmd, "pulumi-resource-kubernetes") {
			g.Expect(environ).To(HaveKey("KUBECONFIG"), cmd)
		}
		if kc, ok := environ["KUBECONFIG"]; ok {
			g.Expect(kc).To(HavePrefix(f.dataDir), "the operation's own kubeconfig: %s", cmd)
		}
	}
}

// TestTenancySecretReadRefused: a program that reads a Secret its ServiceAccount
// may not read (it may manage ConfigMaps only) is refused by the API server, and
// the Secret's value appears nowhere.
func TestTenancySecretReadRefused(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	createSecret(t, f.ns, "db-password", map[string]string{"password": "hunter2-do-not-read"})
	// Importing an existing object reads it first. (Pulumi YAML's `get:` cannot
	// read Kubernetes types: their apiVersion and kind constants trip its check
	// that a read has no properties.)
	reader := bridgeProgram("") + `  dbPassword: ${db.data.password}
`
	reader = replaceOnce(reader, "resources:\n", `resources:
  db:
    type: kubernetes:core/v1:Secret
    properties:
      metadata:
        name: db-password
        namespace: `+f.ns+`
    options:
      import: `+f.ns+`/db-password
`)
	commit := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": reader}, "read a secret")
	createServiceAccount(t, f.ns, "configmaps-only")
	grant(t, f.ns, "configmaps-only", "configmaps")
	f.start(t)

	stack := f.stack("reader", func(s *v1alpha1.Stack) { s.Spec.ServiceAccountName = "configmaps-only" })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	s := waitNotReady(t, client.ObjectKeyFromObject(stack), v1alpha1.AuthenticationFailedReason)
	g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(commit))
	g.Expect(readyMessage(s)).To(ContainSubstring(`secrets "db-password" is forbidden: User "system:serviceaccount:` + f.ns + `:configmaps-only" cannot get resource "secrets"`))
	statusJSON, err := jsonString(s.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statusJSON).NotTo(ContainSubstring("hunter2"))
	g.Expect(s.Status.LastAppliedRevision).To(BeEmpty())
}

// TestTenancyDefaultServiceAccount: with --default-service-account and no
// spec.serviceAccountName, a missing ServiceAccount is a clear wait (retried),
// then the program acts as that ServiceAccount.
func TestTenancyDefaultServiceAccount(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t, "--default-service-account=tenant-default")

	stack := f.stack("defaulted")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitNotReady(t, key, v1alpha1.ServiceAccountNotFoundReason)
	g.Expect(readyMessage(s)).To(ContainSubstring("--default-service-account: ServiceAccount tenant-default not found in namespace " + f.ns))
	g.Expect(s.Status.History).To(BeEmpty(), "no operation ran")

	createServiceAccount(t, f.ns, "tenant-default")
	s = waitNotReady(t, key, v1alpha1.AuthenticationFailedReason)
	g.Expect(readyMessage(s)).To(ContainSubstring(`User "system:serviceaccount:` + f.ns + `:tenant-default" cannot`))

	grant(t, f.ns, "tenant-default", "configmaps")
	s = waitApplied(t, key, f.commit)

	// The digest is keyed with the controller's key, kept in a Secret of its
	// namespace (here the watched one) so that a restarted controller computes
	// the same digests: a restart runs no up.
	g.Expect(s.Status.InputsDigest).To(HavePrefix("hmac-sha256:"))
	var keySecret corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "stackpilot-digest-key"}, &keySecret)).To(Succeed())
	g.Expect(keySecret.Data["key"]).To(HaveLen(32))
	g.Expect(f.ctrl.Stop()).To(Succeed())
	f.start(t, "--default-service-account=tenant-default")
	requestReconcile(t, key)
	g.Eventually(func(g Gomega) {
		after := getStack(g, key)
		g.Expect(after.Status.LastHandledReconcileAt).NotTo(Equal(s.Status.LastHandledReconcileAt), "the requested reconcile ran")
		g.Expect(conditions.IsReady(after)).To(BeTrue())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	after := getStack(g, key)
	g.Expect(after.Status.InputsDigest).To(Equal(s.Status.InputsDigest))
	g.Expect(after.Status.History).To(HaveLen(len(s.Status.History)))
	g.Expect(f.ctrl.Operations(t, "up")).To(BeZero(), "no up after a restart")
}

func createServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := env.Client.Create(context.Background(), sa); err != nil {
		t.Fatal(err)
	}
}

// grant lets ServiceAccount ns/name do everything with resources in ns.
func grant(t *testing.T, ns, name string, resources ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-role", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: []string{"*"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-binding", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// kubeconfigsUnder lists files named kubeconfig under dir.
func kubeconfigsUnder(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil // a directory removed while walking
		}
		if !d.IsDir() && d.Name() == "kubeconfig" {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// envWatcher records the environment of every descendant of a process, read
// from /proc while they run: the runner and its Pulumi processes are short-lived.
type envWatcher struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen map[string]map[string]string // "pid cmdline" -> environment
}

func watchRunnerEnv(t *testing.T, root int) *envWatcher {
	w := &envWatcher{done: make(chan struct{}), seen: map[string]map[string]string{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			w.scan(root)
			select {
			case <-w.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *envWatcher) stop() map[string]map[string]string {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

func (w *envWatcher) scan(root int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	// A child between fork and exec still shows the controller's own command
	// line and environment (its KUBECONFIG): it is not yet the runner, so it
	// is left out, as is anything else with the controller's command line.
	own, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(root), "cmdline"))
	if err != nil {
		return
	}
	parents := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after ')'.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		if fields := strings.Fields(rest); len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			parents[pid] = ppid
		}
	}
	for pid := range parents {
		if pid == root || !descends(parents, pid, root) {
			continue
		}
		cmdline, err1 := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		environ, err2 := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err1 != nil || err2 != nil || len(cmdline) == 0 || bytes.Equal(cmdline, own) {
			continue
		}
		name := strconv.Itoa(pid) + " " + strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ") + " "
		vars := map[string]string{}
		for _, kv := range strings.Split(string(environ), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				vars[k] = v
			}
		}
		w.mu.Lock()
		w.seen[name] = vars
		w.mu.Unlock()
	}
}

func descends(parents map[int]int, pid, root int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		pid = parents[pid]
		if pid == root {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
