package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestKustomizationWaitsOnStack: Flux's kustomize-controller applies, from a
// GitRepository of the fleet repository, the folder deploy/ holding a Stack
// manifest whose program is app/ of the same repository, with wait: true. The
// Kustomization is Ready only once the Stack is: kstatus reads our
// conditions and observedGeneration. A commit that breaks the program makes
// the Stack fail, and the Kustomization's health check with it, naming the
// Stack.
func TestKustomizationWaitsOnStack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.commit = f.git.Commit(t, "infra", "main", map[string]string{
		"app/Pulumi.yaml":   bridgeProgram(""),
		"deploy/stack.yaml": f.stackManifest(t, "bridge", "infra"),
	}, "deploy the bridge Stack")
	env.StartSourceControllerIn(t, f.ns)
	kc := env.StartKustomizeControllerIn(t, f.ns)
	f.start(t)
	defer func() {
		if t.Failed() {
			t.Logf("kustomize-controller log:\n%s", kc.Logs(40))
		}
	}()

	g.Expect(env.Client.Create(ctx, fluxObject("GitRepository", f.ns, "infra", map[string]any{
		"url":      f.repoURL,
		"interval": "2s",
		"ref":      map[string]any{"branch": "main"},
	}))).To(Succeed())
	created := time.Now()
	g.Expect(env.Client.Create(ctx, kustomization(f.ns, "stacks", map[string]any{
		"interval":        "30s",
		"path":            "./deploy",
		"prune":           true,
		"wait":            true,
		"timeout":         "2m",
		"targetNamespace": f.ns,
		"sourceRef":       map[string]any{"kind": "GitRepository", "name": "infra"},
	}))).To(Succeed())
	kkey := client.ObjectKey{Namespace: f.ns, Name: "stacks"}
	skey := client.ObjectKey{Namespace: f.ns, Name: "bridge"}

	// Watch both every 100ms: the first time the Kustomization is Ready, the
	// Stack must already be, at the commit.
	var k *unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		k = getKustomization(g, kkey)
		ready := readyOf(k)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Kustomization Ready: %s/%s", ready.Reason, ready.Message)
		s := getStack(g, skey)
		if !conditions.IsReady(s) || s.Status.ObservedGeneration != s.Generation {
			StopTrying(fmt.Sprintf("the Kustomization is Ready (%s) before the Stack (Ready %s, observedGeneration %d of %d)",
				ready.Message, readyMessage(s), s.Status.ObservedGeneration, s.Generation)).Now()
		}
	}, 4*time.Minute, 100*time.Millisecond).Should(Succeed())
	kReadyAt := time.Now()
	s := getStack(g, skey)
	g.Expect(s.Status.LastAppliedRevision).To(Equal("main@sha1:" + f.commit))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
	stackReady := conditions.Get(s, v1alpha1.ReadyCondition).LastTransitionTime
	kReady := readyOf(k).LastTransitionTime
	g.Expect(kReady.Before(&stackReady)).To(BeFalse(), "Kustomization Ready at %s, Stack Ready at %s", kReady, stackReady)
	t.Logf("Kustomization created to Stack Ready %s; Stack Ready %s to Kustomization Ready (condition times, 1s resolution); Kustomization Ready seen %s after creation",
		stackReady.Sub(created).Round(time.Second), kReady.Sub(stackReady.Time), kReadyAt.Sub(created).Round(100*time.Millisecond))

	// A broken program, same Stack manifest: the Stack fails and the
	// Kustomization's health check with it. A retried program error is
	// InProgress to kstatus, so the Kustomization fails at its timeout: the
	// 2m above leaves a loaded machine time for the first up; here, where
	// the Stack fails in seconds, the shortest timeout kustomize-controller
	// honours (it raises anything below 30s to 30s) saves 90s of waiting.
	// The Kustomization is Ready again with the new timeout first, so the
	// failure below is the broken commit's.
	const failTimeout = 30 * time.Second
	g.Expect(env.Client.Patch(ctx, kustomization(f.ns, "stacks", nil), client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"spec":{"timeout":%q}}`, failTimeout))))).To(Succeed())
	g.Eventually(func(g Gomega) {
		k := getKustomization(g, kkey)
		observed, _, _ := unstructured.NestedInt64(k.Object, "status", "observedGeneration")
		g.Expect(observed).To(Equal(k.GetGeneration()))
		ready := readyOf(k)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Kustomization Ready: %s/%s", ready.Reason, ready.Message)
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	pushed := time.Now()
	broken := f.git.Commit(t, "infra", "main", map[string]string{
		"app/Pulumi.yaml":   bridgeProgram("\n        broken: ${doesNotExist}"),
		"deploy/stack.yaml": f.stackManifest(t, "bridge", "infra"),
	}, "break the program")
	s = waitNotReady(t, skey, v1alpha1.ProgramErrorReason)
	stackFailed := time.Now()
	g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(broken))
	g.Expect(readyMessage(s)).To(ContainSubstring("doesNotExist"))
	var message string
	g.Eventually(func(g Gomega) {
		k = getKustomization(g, kkey)
		ready := readyOf(k)
		g.Expect(ready).NotTo(BeNil())
		rev, _, _ := unstructured.NestedString(k.Object, "status", "lastAttemptedRevision")
		g.Expect(rev).To(HaveSuffix(broken))
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), "Kustomization Ready: %s/%s", ready.Reason, ready.Message)
		message = ready.Reason + ": " + ready.Message
	}, 5*time.Minute, time.Second).Should(Succeed())
	kFailed := time.Now()
	t.Logf("broken commit to Stack failed %s; Stack failed to Kustomization Ready=False %s (its timeout is %s); Kustomization says %q",
		stackFailed.Sub(pushed).Round(100*time.Millisecond), kFailed.Sub(stackFailed).Round(100*time.Millisecond), failTimeout, message)
	// kustomize-controller v1.9.6 names the unhealthy object and its kstatus
	// status, never the object's own message (fluxcd/pkg/ssa's
	// WaitForSetWithContext formats only a status reader error): the Stack's
	// message is on the Stack. A retried program error is Reconciling, so
	// kstatus says InProgress and the Kustomization fails at its timeout.
	g.Expect(message).To(HavePrefix(meta.HealthCheckFailedReason + ": "))
	g.Expect(message).To(ContainSubstring("[Stack/" + f.ns + "/bridge status: 'InProgress']"))
	// The Stack retries the failed up (retryInterval), so its Ready may say
	// Progressing at any one moment: the failure is in its history.
	g.Expect(lastFinished(getStack(g, skey), broken).Message).To(ContainSubstring("doesNotExist"), "the failure is on the Stack the Kustomization names")
}

// lastFinished is the newest finished history record of the Stack at the
// revision ending in sha (a zero record when there is none).
func lastFinished(s *v1alpha1.Stack, sha string) v1alpha1.OperationRecord {
	for _, h := range s.Status.History {
		if h.FinishedAt != nil && strings.HasSuffix(h.Revision, sha) {
			return h
		}
	}
	return v1alpha1.OperationRecord{}
}

// stackManifest is the YAML of the fixture's Stack following the GitRepository
// source, as a user keeps it in a fleet repository: no namespace (the
// Kustomization's targetNamespace sets it), no status.
func (f *fixture) stackManifest(t *testing.T, name, source string) string {
	t.Helper()
	s := f.sourceRefStack(name, v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: source})
	s.APIVersion, s.Kind = v1alpha1.GroupVersion.String(), "Stack"
	s.Namespace = ""
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	delete(m["metadata"].(map[string]any), "creationTimestamp")
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// kustomization makes a kustomize.toolkit.fluxcd.io/v1 Kustomization.
func kustomization(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
		"kind":       "Kustomization",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
}

func getKustomization(g Gomega, key client.ObjectKey) *unstructured.Unstructured {
	k := kustomization(key.Namespace, key.Name, nil)
	g.Expect(env.Client.Get(context.Background(), key, k)).To(Succeed())
	return k
}

// readyOf is the Ready condition of a Flux object, nil when it has none.
func readyOf(u *unstructured.Unstructured) *metav1.Condition {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range list {
		raw, err := json.Marshal(c)
		if err != nil {
			continue
		}
		var cond metav1.Condition
		if json.Unmarshal(raw, &cond) == nil && cond.Type == "Ready" {
			return &cond
		}
	}
	return nil
}
