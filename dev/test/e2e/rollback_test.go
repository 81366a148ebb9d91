package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// partwayProgram is the bridge program with extraData in app-settings, plus
// a ConfigMap app-extra that is created and, after it, one the API server
// refuses (its name): an up of it fails part-way, with app-settings updated
// and app-extra created.
func partwayProgram(extraData string) string {
	return replaceOnce(bridgeProgram(extraData), "outputs:\n", `  extra:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: app-extra
        namespace: ${namespace}
      data:
        a: "1"
  broken:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: Not_A_Valid_Name
        namespace: ${namespace}
      data:
        # Known only once app-extra exists.
        uid: ${extra.metadata.uid}
    options:
      dependsOn:
        - ${extra}
outputs:
`)
}

// rollbackStack is f.stack with rollback on, polling the source every 4 s
// and retrying every 2 s: a retry of the failed change would show at once.
func (f *fixture) rollbackStack(name string, mutate ...func(*v1alpha1.Stack)) *v1alpha1.Stack {
	return f.stack(name, append([]func(*v1alpha1.Stack){func(s *v1alpha1.Stack) {
		s.Spec.Rollback = &v1alpha1.Rollback{Enabled: true, AfterFailures: 1}
		s.Spec.Interval = metav1.Duration{Duration: 4 * time.Second}
		s.Spec.RetryInterval = &metav1.Duration{Duration: 2 * time.Second}
	}}, mutate...)...)
}

// expectRolledBack checks the history's newest two records: the failed up of
// failed, then the rollback to restored with outcome.
func expectRolledBack(g Gomega, s *v1alpha1.Stack, failed, restored string, outcome v1alpha1.OperationOutcome) {
	g.Expect(len(s.Status.History)).To(BeNumerically(">=", 2))
	rb, up := s.Status.History[0], s.Status.History[1]
	g.Expect(rb.Type).To(Equal(v1alpha1.OperationRollback))
	g.Expect(rb.Outcome).To(Equal(outcome))
	g.Expect(rb.Revision).To(HaveSuffix(restored))
	g.Expect(up.Type).To(Equal(v1alpha1.OperationUp))
	g.Expect(up.Outcome).To(Equal(v1alpha1.OutcomeFailed))
	g.Expect(up.Revision).To(HaveSuffix(failed))
	g.Expect(s.Status.Rollback).NotTo(BeNil())
	g.Expect(s.Status.Rollback.FailedRevision).To(HaveSuffix(failed))
	g.Expect(s.Status.Rollback.RestoredRevision).To(HaveSuffix(restored))
	g.Expect(s.Status.Rollback.Outcome).To(Equal(outcome))
	g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(restored), "the failed change is not applied")
	g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(failed), "the failed change is the attempted one still")
	g.Expect(s.Status.Failures).To(BeNumerically(">=", 1), "and it is not fixed")
}

// expectHeld waits several retryIntervals and intervals and checks that no
// operation ran: the rolled-back change is not tried again.
func expectHeld(t *testing.T, f *fixture, key client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	ups, rollbacks := f.ctrl.Operations(t, "up"), f.ctrl.Operations(t, "rollback")
	history := applyRecords(getStack(g, key))
	time.Sleep(14 * time.Second) // 7 retryIntervals, 3 intervals
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups), "the failed change is not retried")
	g.Expect(f.ctrl.Operations(t, "rollback")).To(Equal(rollbacks), "nor rolled back again")
	s := getStack(g, key)
	g.Expect(applyRecords(s)).To(Equal(history))
	g.Expect(s.Status.CurrentOperation).To(BeNil())
}

// applyRecords are the IDs of the history's records other than drift checks
// (which go on at the applied revision).
func applyRecords(s *v1alpha1.Stack) []string {
	var ids []string
	for _, h := range s.Status.History {
		if h.Type != v1alpha1.OperationDriftCheck {
			ids = append(ids, h.ID)
		}
	}
	return ids
}

// TestRollbackPartwayFailure: a commit whose up fails part-way is rolled
// back: the ConfigMap it created is gone, the old data is back, the history
// shows the failed up then the rollback, Ready says both revisions, and the
// failed revision is not retried (nor is a commit that leaves its program
// as it is) until a commit changes the program, which applies.
func TestRollbackPartwayFailure(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	logOnFailure(t, f)
	stack := f.rollbackStack("partway")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	bad := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": partwayProgram("\n        size: large")}, "fails part-way")
	s := waitNotReady(t, key, v1alpha1.RolledBackReason)
	expectRolledBack(g, s, bad, f.commit, v1alpha1.OutcomeSucceeded)
	g.Expect(readyMessage(s)).To(ContainSubstring(bad))
	g.Expect(readyMessage(s)).To(ContainSubstring(f.commit))
	g.Expect(s.Status.History[1].Message).To(ContainSubstring("Not_A_Valid_Name"), "the up failed on the refused ConfigMap")
	g.Expect(configMapData(g, f.ns, "app-settings")).To(Equal(map[string]string{"color": "blue"}), "the old data is back")
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-extra"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ConfigMap the failed up created is removed: %v", err)
	g.Expect(f.ctrl.Operations(t, "rollback")).To(Equal(1))
	g.Expect(hasLine(stackEvents(t, f.ns, key.Name), "rolled back to revision")).To(BeTrue(), "an event tells of the rollback")

	expectHeld(t, f, key)
	// A commit outside the program's folder leaves the program as it is:
	// the failed change is still the one wanted, and still held.
	f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": partwayProgram("\n        size: large"), "README.md": "docs"}, "elsewhere")
	expectHeld(t, f, key)

	fixed := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: medium")}, "fix")
	s = waitApplied(t, key, fixed)
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "medium"))
	g.Expect(s.Status.History[0].Type).To(Equal(v1alpha1.OperationUp))
	g.Expect(s.Status.Failures).To(BeZero())
}

// inputsProgram writes app-settings from config color, then (after it) a
// ConfigMap named from config suffix: a suffix the API server refuses makes
// an up that fails after app-settings is updated.
const inputsProgram = `name: inputs
runtime: yaml
config:
  namespace:
    type: string
  color:
    type: string
  suffix:
    type: string
  token:
    type: string
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: app-settings
        namespace: ${namespace}
      data:
        color: ${color}
  named:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: app-${suffix}
        namespace: ${namespace}
      data:
        from: ${settings.metadata.uid}
    options:
      dependsOn:
        - ${settings}
outputs:
  token: ${token}
`

// TestRollbackInputsChange: an edit of a configFrom ConfigMap whose up fails
// is rolled back with the inputs applied before (kept encrypted in the data
// dir, the secret among them never shown); the edit is not retried until the
// ConfigMap changes again.
func TestRollbackInputsChange(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newDriftFixture(t, inputsProgram)
	const token = "rollback-token-5e1f"
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": token})
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: f.ns},
		Data: map[string]string{"color": "green", "suffix": "one"}}
	g.Expect(env.Client.Create(ctx, settings)).To(Succeed())
	f.start(t)
	logOnFailure(t, f)
	stack := f.rollbackStack("inputs", func(s *v1alpha1.Stack) {
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{
			{ConfigMapRef: &v1alpha1.OptionalObjectReference{Name: "app-config"}},
			{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}},
		}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	applied := waitApplied(t, key, f.commit)
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "green"))

	// The applied inputs are kept, encrypted, readable by the controller alone.
	dir := filepath.Join(f.dataDir, "inputs", string(applied.UID))
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))
	info, err := entries[0].Info()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	raw, err := os.ReadFile(filepath.Join(dir, entries[0].Name()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring(token))
	g.Expect(string(raw)).NotTo(ContainSubstring(passphrase))
	g.Expect(string(raw)).NotTo(ContainSubstring("green"))

	patchObject(t, configMapRef(f.ns, "app-config"), `{"data":{"color":"red","suffix":"Not_Valid"}}`)
	s := waitNotReady(t, key, v1alpha1.RolledBackReason)
	expectRolledBack(g, s, f.commit, f.commit, v1alpha1.OutcomeSucceeded)
	g.Expect(s.Status.Rollback.FailedInputsDigest).NotTo(Equal(applied.Status.InputsDigest))
	g.Expect(s.Status.Rollback.RestoredInputsDigest).To(Equal(applied.Status.InputsDigest))
	g.Expect(s.Status.InputsDigest).To(Equal(applied.Status.InputsDigest), "the applied inputs are the old ones")
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "green"), "the old inputs are applied again")
	g.Expect(configMapData(g, f.ns, "app-one")).To(HaveKey("from"))

	expectHeld(t, f, key)

	// A new edit is a new change: it applies.
	patchObject(t, configMapRef(f.ns, "app-config"), `{"data":{"color":"red","suffix":"two"}}`)
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(readyMessage(s)).To(HavePrefix("True/"))
		g.Expect(s.Status.InputsDigest).NotTo(Equal(applied.Status.InputsDigest))
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "red"))
	g.Expect(configMapData(g, f.ns, "app-two")).To(HaveKey("from"))
	assertNoSecrets(t, f, key, token, passphrase)

	// Deleting the Stack removes the kept inputs.
	g.Expect(env.Client.Delete(ctx, stack)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &v1alpha1.Stack{}))
	}, 2*time.Minute, time.Second).Should(BeTrue())
	g.Expect(dir).NotTo(BeADirectory())
}

// auxProgram is the bridge program with one more ConfigMap, name, in
// namespace aux, replaced (deleted first) when its name changes.
func auxProgram(aux, name string) string {
	return replaceOnce(bridgeProgram(""), "outputs:\n", `  aux:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: `+name+`
        namespace: `+aux+`
      data:
        k: v
    options:
      deleteBeforeReplace: true
outputs:
`)
}

// TestRollbackFailed: a rollback that fails is reported (RollbackFailed,
// status.rollback.outcome failed) and does not loop: neither the rollback
// nor the failed change runs again until a person requests a reconcile,
// which tries the change again (and, failing, rolls it back again).
func TestRollbackFailed(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	// Namespace aux, once deleted, stays Terminating (its finalizer is the
	// test's) and refuses new objects at once.
	aux := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-aux", Finalizers: []string{"stackpilot.dev/e2e-hold"}}}
	g.Expect(env.Client.Create(ctx, aux)).To(Succeed())
	t.Cleanup(func() {
		release := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		_ = env.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: aux.Name}}, release)
		_ = env.Client.Delete(context.Background(), aux)
	})
	good := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": auxProgram(aux.Name, "old-name")}, "aux")
	f.start(t)
	logOnFailure(t, f)
	stack := f.rollbackStack("failing")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, good)

	// From now on the API server refuses any new ConfigMap in aux: the
	// rename fails to create new-name, and the rollback fails to create
	// old-name again.
	g.Expect(env.Client.Delete(ctx, aux)).To(Succeed())
	bad := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": auxProgram(aux.Name, "new-name")}, "rename")
	s := waitNotReady(t, key, v1alpha1.RollbackFailedReason)
	expectRolledBack(g, s, bad, good, v1alpha1.OutcomeFailed)
	g.Expect(readyMessage(s)).To(ContainSubstring("rollback to revision " + s.Status.LastAppliedRevision))
	g.Expect(readyMessage(s)).To(ContainSubstring("being terminated"), "the rollback's own error")
	g.Expect(s.Status.History[0].Message).To(ContainSubstring("old-name"))
	g.Expect(f.ctrl.Operations(t, "rollback")).To(Equal(1))
	g.Expect(hasLine(stackEvents(t, f.ns, key.Name), "failed too")).To(BeTrue(), "an event tells of the failed rollback")

	expectHeld(t, f, key)
	g.Expect(readyMessage(getStack(g, key))).To(HavePrefix("False/" + v1alpha1.RollbackFailedReason))

	// A request tries the change again, once; it fails, and its rollback
	// fails again, once.
	ups := f.ctrl.Operations(t, "up")
	waitHandled(t, key, requestReconcile(t, key))
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(f.ctrl.Operations(t, "rollback")).To(Equal(2))
	}, 2*time.Minute, time.Second).Should(Succeed())
	s = waitNotReady(t, key, v1alpha1.RollbackFailedReason)
	expectRolledBack(g, s, bad, good, v1alpha1.OutcomeFailed)
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups+1), "the request tried the change once")
	expectHeld(t, f, key)
}
