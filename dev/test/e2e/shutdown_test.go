package e2e

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// TestControllerSIGTERMedMidUp: the controller is told to stop while an up
// waits on a resource. It asks the runner to cancel, Pulumi stops cleanly, the
// cancelled (or finished) operation is recorded, and the controller exits
// within its graceful shutdown timeout with nothing left running or locked.
// The next controller finishes the job without clearing any lock.
func TestControllerSIGTERMedMidUp(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const grace = 30 * time.Second
	f := newFixture(t)
	f.start(t, "--graceful-shutdown-timeout="+grace.String())
	// An hour between retries: after the restart, only the rule that an
	// operation cut short by the controller runs again at once can apply the
	// revision within waitApplied's minutes.
	stack := f.stack("shutdown", func(s *v1alpha1.Stack) { s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	// The new revision's ConfigMap is ready only once it carries proceed=yes:
	// the provider applies it, then waits; the controller is stopped then.
	gated := gatedProgram("gated")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": gated}, "gated")
	requestReconcile(t, key)
	var opID string
	g.Eventually(func(g Gomega) {
		op := getStack(g, key).Status.CurrentOperation
		g.Expect(op).NotTo(BeNil())
		opID = op.ID
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "gated"))
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	locks := func() []string { return lockFiles(t, filepath.Join(f.dataDir, "state")) }
	g.Expect(locks()).NotTo(BeEmpty(), "Pulumi holds the stack lock while it waits")
	g.Expect(operationProcesses(f.dataDir)).NotTo(BeEmpty(), "the runner, pulumi and its plugins run")

	stopped := time.Now()
	g.Expect(syscall.Kill(f.ctrl.Pid(), syscall.SIGTERM)).To(Succeed())
	g.Eventually(f.ctrl.Exited(), grace+20*time.Second).Should(BeClosed(), "the controller exits within its graceful timeout")
	t.Logf("the controller stopped %s after SIGTERM; its log ends:\n%s", time.Since(stopped).Round(time.Millisecond),
		testenv.TailFile(f.ctrl.LogPath, 15))

	g.Expect(locks()).To(BeEmpty(), "Pulumi released its lock")
	g.Eventually(func() []string { return operationProcesses(f.dataDir) }, 10*time.Second, 100*time.Millisecond).
		Should(BeEmpty(), "no runner, pulumi or plugin process survives the controller")
	s := getStack(g, key)
	g.Expect(s.Status.CurrentOperation).To(BeNil(), "the end of the operation was recorded")
	g.Expect(s.Status.History).NotTo(BeEmpty())
	last := s.Status.History[0]
	g.Expect(last.ID).To(Equal(opID))
	g.Expect(last.FinishedAt).NotTo(BeNil())
	g.Expect(last.Outcome).To(BeElementOf(v1alpha1.OperationOutcome(runner.OutcomeCancelled), v1alpha1.OutcomeSucceeded),
		"the runner wrote its result (a killed one is recorded interrupted); history: %+v", s.Status.History)
	t.Logf("the up ended %s: %s", last.Outcome, last.Message)
	if last.Outcome == v1alpha1.OperationOutcome(runner.OutcomeCancelled) {
		g.Expect(last.Reason).To(Equal(v1alpha1.InterruptedReason), "cut short by the shutdown, not by the program")
	}

	// The gate opens; the next controller applies the revision on the state the
	// cancelled up left, without a lock to clear: nothing was interrupted.
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &cm)).To(Succeed())
	g.Expect(env.Client.Patch(ctx, &cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"proceed":"yes"}}}`)))).To(Succeed())
	f.start(t)
	s = waitApplied(t, key, next)
	g.Expect(s.Status.CurrentOperation).To(BeNil())
	for _, h := range s.Status.History {
		g.Expect(h.Outcome).NotTo(Equal(v1alpha1.OutcomeInterrupted), "history: %+v", s.Status.History)
	}
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(locks()).To(BeEmpty())
}

// lockFiles lists the lock files under a file:// backend root (every stack).
func lockFiles(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.Contains(path, "/.pulumi/locks/") && strings.HasSuffix(path, ".json") {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// operationProcesses lists the live processes working below dataDir: runners
// (in operations/<id>), pulumi and its plugins (in the program's copy). The
// controller itself works in dataDir, not below it.
func operationProcesses(dataDir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err != nil || !strings.HasPrefix(cwd, dataDir+"/") || !runner.ProcessAlive(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}
