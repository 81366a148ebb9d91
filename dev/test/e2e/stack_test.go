package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestStackFromGit follows one Stack through its life: first apply with outputs
// published, a new commit, a config change, a change in a referenced Secret, and
// deletion with destroyOnDelete. Secrets never show in status, events or logs.
func TestStackFromGit(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": "s3cr3t-t0ken-value"})
	f.start(t)

	stack := f.stack("bridge", func(s *v1alpha1.Stack) {
		s.Spec.DestroyOnDelete = true
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	// First apply.
	s := waitApplied(t, key, f.commit)
	g.Expect(s.Status.LastAppliedRevision).To(Equal("main@sha1:" + f.commit))
	g.Expect(s.Status.Outputs).To(HaveKeyWithValue("color", `"blue"`))
	g.Expect(s.Status.Outputs).To(HaveKeyWithValue("configMap", `"app-settings"`))
	g.Expect(s.Status.Outputs).To(HaveKeyWithValue("token", v1alpha1.SecretOutputValue))
	g.Expect(s.Status.History).To(HaveLen(1))
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(s.Status.History[0].Changes.Create).To(BeNumerically(">=", 1))
	firstUp := s.Status.History[0]
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
	var outSecret corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "bridge-outputs"}, &outSecret)).To(Succeed())
	g.Expect(string(outSecret.Data["token"])).To(Equal("s3cr3t-t0ken-value"))
	g.Expect(string(outSecret.Data["color"])).To(Equal("blue"))
	outCM := configMapData(g, f.ns, "bridge-outputs")
	g.Expect(outCM).To(HaveKeyWithValue("color", "blue"))
	g.Expect(outCM).NotTo(HaveKey("token"), "secret outputs stay out of the ConfigMap")

	// A new commit is applied with its new revision.
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: large")}, "add size")
	requestReconcile(t, key)
	waitApplied(t, key, next)
	g.Eventually(func(g Gomega) {
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "large"))
	}, time.Minute, 50*time.Millisecond).Should(Succeed())

	// A config change is applied.
	// A patch, not an update: the controller may be writing status meanwhile,
	// and an update from a stale read would conflict.
	s = getStack(g, key)
	before := s.DeepCopy()
	s.Spec.Config["color"] = apiextensionsv1.JSON{Raw: []byte(`"green"`)}
	g.Expect(env.Client.Patch(ctx, s, client.MergeFrom(before))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "green"))
		g.Expect(getStack(g, key).Status.Outputs).To(HaveKeyWithValue("color", `"green"`))
	}, 3*time.Minute, time.Second).Should(Succeed())

	// A change in a referenced Secret is applied.
	var appSecret corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-secrets"}, &appSecret)).To(Succeed())
	appSecret.Data["token"] = []byte("r0tated-t0ken-value")
	g.Expect(env.Client.Update(ctx, &appSecret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "bridge-outputs"}, &outSecret)).To(Succeed())
		g.Expect(string(outSecret.Data["token"])).To(Equal("r0tated-t0ken-value"))
	}, 3*time.Minute, time.Second).Should(Succeed())
	s = waitApplied(t, key, next)
	g.Expect(len(s.Status.History)).To(BeNumerically(">=", 4))

	// Events name each operation's start and end with change counts.
	events := stackEvents(t, f.ns, "bridge")
	g.Expect(hasLine(events, "OperationStarted")).To(BeTrue(), "events: %v", events)
	created := fmt.Sprintf("%s of revision %s succeeded: %d created,", firstUp.ID, firstUp.Revision, firstUp.Changes.Create)
	g.Expect(hasLine(events, created)).To(BeTrue(), "events: %v", events)

	// No secret value anywhere a person or a log shipper can see.
	assertNoSecrets(t, f, key, "s3cr3t-t0ken-value", "r0tated-t0ken-value", passphrase)

	// Delete with destroyOnDelete removes what the program made.
	g.Expect(env.Client.Delete(ctx, s)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &v1alpha1.Stack{}))
	}, 3*time.Minute, time.Second).Should(BeTrue(), "the finalizer is released after the destroy")
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the program's ConfigMap is destroyed")
}

// assertNoSecrets scans the Stack's status, its events and the controller's log.
func assertNoSecrets(t *testing.T, f *fixture, key client.ObjectKey, secrets ...string) {
	t.Helper()
	g := NewWithT(t)
	s := getStack(g, key)
	status, err := jsonString(s.Status)
	g.Expect(err).NotTo(HaveOccurred())
	events := strings.Join(stackEvents(t, f.ns, key.Name), "\n")
	logs := f.ctrl.Logs(t)
	for _, secret := range secrets {
		g.Expect(status).NotTo(ContainSubstring(secret), "status")
		g.Expect(events).NotTo(ContainSubstring(secret), "events")
		g.Expect(logs).NotTo(ContainSubstring(secret), "controller logs")
	}
}
