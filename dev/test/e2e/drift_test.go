package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestDrift follows one Stack, whose program owns two ConfigMaps, through
// real drift made with PATCH and DELETE in the API server, as a person with
// kubectl would. The steps build on each other (one Stack, one apply: every
// Pulumi run costs seconds), so a failed step ends the test.
//
//	detect:    an edited key is reported exactly, nothing changes, Ready stays True
//	delete:    a deleted ConfigMap is reported as op delete, still in Detect
//	remediate: Remediate restores the key and re-creates the ConfigMap
//	ignore:    an ignored key is neither reported nor restored, another key is
//	failed:    after a commit that fails to apply, a check checks the applied revision
func TestDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newDriftFixture(t, driftProgram(""))
	f.start(t)
	logOnFailure(t, f)
	stack := f.driftStack("drift", v1alpha1.DriftDetection{Mode: v1alpha1.DriftDetect})
	if err := env.Client.Create(ctx, stack); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(stack)
	applied := waitApplied(t, key, f.commit)
	appliedRevision := applied.Status.LastAppliedRevision
	if appliedRevision != "main@sha1:"+f.commit {
		t.Fatalf("lastAppliedRevision %q, want main@sha1:%s", appliedRevision, f.commit)
	}
	var firstURN, secondURN string

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"detect", func(t *testing.T) {
			g := NewWithT(t)
			patchObject(t, configMapRef(f.ns, "drift-first"), `{"data":{"a":"edited-by-hand"}}`)
			requested := time.Now()
			s := driftCheck(t, key, nil)

			expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
			g.Expect(conditions.IsReady(s)).To(BeTrue(), "drift does not change Ready: %s", readyMessage(s))
			d := s.Status.Drift
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Total).To(Equal(int64(1)), "status.drift: %+v", d)
			g.Expect(d.Resources).To(HaveLen(1), "status.drift.resources: %+v", d.Resources)
			r := d.Resources[0]
			g.Expect(r.URN).To(HaveSuffix("::" + configMapType + "::first"))
			g.Expect(r).To(Equal(v1alpha1.DriftedResource{URN: r.URN, Type: configMapType, Name: "first", Op: "update", Properties: []string{"data.a"}}))
			firstURN = r.URN
			g.Expect(d.Revision).To(Equal(appliedRevision))
			g.Expect(d.CheckedAt).NotTo(BeNil())
			g.Expect(d.CheckedAt.Time).NotTo(BeTemporally("<", notBefore(requested)))
			g.Expect(d.NextCheckAt).NotTo(BeNil(), "the next scheduled check is in status")
			g.Expect(driftedMessage(s)).To(ContainSubstring("first"))

			g.Expect(configMapData(g, f.ns, "drift-first")).To(HaveKeyWithValue("a", "edited-by-hand"), "Detect changes nothing")
			checks := records(s, v1alpha1.OperationDriftCheck)
			g.Expect(checks).NotTo(BeEmpty(), "history: %+v", s.Status.History)
			g.Expect(checks[0].Revision).To(Equal(appliedRevision))
			g.Expect(checks[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
			g.Expect(records(s, v1alpha1.OperationUp)).To(HaveLen(1), "a check is no up")
			g.Eventually(func() int { return countReason(eventCounts(t, f.ns, key.Name), v1alpha1.DriftDetectedReason) }, time.Minute, 50*time.Millisecond).
				Should(Equal(1), "one DriftDetected event")
			g.Expect(metric(t, f, "stackpilot_stack_drifted", `name="drift"`)).To(Equal(1.0))
			g.Expect(metric(t, f, "stackpilot_drift_checks_total", `outcome="drifted"`)).To(Equal(1.0))

			// The same drift checked again: no new event.
			s = driftCheck(t, key, nil)
			expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
			g.Expect(s.Status.Drift.Resources).To(Equal(d.Resources))
			t.Logf("drift-check records after the second check: %d (before it: %d)", len(records(s, v1alpha1.OperationDriftCheck)), len(checks))
			g.Expect(metric(t, f, "stackpilot_drift_checks_total", `outcome="drifted"`)).To(Equal(2.0))
			g.Consistently(func() int { return countReason(eventCounts(t, f.ns, key.Name), v1alpha1.DriftDetectedReason) }, 2*time.Second, 250*time.Millisecond).
				Should(Equal(1), "a second check of the same drift adds no event")
		}},
		{"delete", func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(env.Client.Delete(ctx, configMapRef(f.ns, "drift-second"))).To(Succeed())
			s := driftCheck(t, key, nil)

			expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
			d := s.Status.Drift
			g.Expect(d.Total).To(Equal(int64(2)), "status.drift: %+v", d)
			g.Expect(d.Resources).To(HaveLen(2), "status.drift.resources: %+v", d.Resources)
			var gone *v1alpha1.DriftedResource
			for i := range d.Resources {
				if d.Resources[i].Name == "second" {
					gone = &d.Resources[i]
				} else {
					g.Expect(d.Resources[i]).To(Equal(v1alpha1.DriftedResource{URN: firstURN, Type: configMapType, Name: "first", Op: "update", Properties: []string{"data.a"}}))
				}
			}
			g.Expect(gone).NotTo(BeNil(), "the deleted ConfigMap is reported: %+v", d.Resources)
			g.Expect(gone.Op).To(Equal("delete"))
			g.Expect(gone.Type).To(Equal(configMapType))
			g.Expect(gone.URN).To(HaveSuffix("::" + configMapType + "::second"))
			secondURN = gone.URN
			t.Logf("deleted resource reported as %+v", *gone)

			err := env.Client.Get(ctx, client.ObjectKeyFromObject(configMapRef(f.ns, "drift-second")), configMapRef(f.ns, "drift-second"))
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Detect re-creates nothing")
			g.Eventually(func() int { return countReason(eventCounts(t, f.ns, key.Name), v1alpha1.DriftDetectedReason) }, time.Minute, 50*time.Millisecond).
				Should(Equal(2), "the set of drifted resources changed: a new DriftDetected event")
		}},
		{"remediate", func(t *testing.T) {
			g := NewWithT(t)
			before := getStack(g, key)
			s := driftCheck(t, key, map[string]any{"driftDetection": map[string]any{"mode": v1alpha1.DriftRemediate}})
			t.Logf("after the check: Drifted %s", driftedMessage(s))

			g.Eventually(func(g Gomega) {
				s = getStack(g, key)
				expectDrifted(g, s, metav1.ConditionFalse, v1alpha1.RemediatedReason)
			}, 2*time.Minute, time.Second).Should(Succeed())
			g.Expect(configMapData(g, f.ns, "drift-first")).To(Equal(map[string]string{"a": "1", "b": "2", "c": "3"}), "the edited key is restored")
			g.Expect(configMapData(g, f.ns, "drift-second")).To(Equal(map[string]string{"x": "1"}), "the deleted ConfigMap is re-created")
			g.Expect(conditions.IsReady(s)).To(BeTrue(), "Ready: %s", readyMessage(s))
			rem := records(s, v1alpha1.OperationRemediate)
			g.Expect(rem).To(HaveLen(1), "history: %+v", s.Status.History)
			g.Expect(rem[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded), "remediate: %+v", rem[0])
			g.Expect(rem[0].Revision).To(Equal(appliedRevision))
			g.Expect(rem[0].Resources).To(ConsistOf(firstURN, secondURN))
			g.Expect(s.Status.LastAppliedRevision).To(Equal(appliedRevision))
			g.Expect(len(s.Status.History)).To(BeNumerically(">", len(before.Status.History)))
			g.Eventually(func() int { return countReason(eventCounts(t, f.ns, key.Name), v1alpha1.RemediatedReason) }, time.Minute, 50*time.Millisecond).
				Should(Equal(1), "one Remediated event")
			g.Expect(metric(t, f, "stackpilot_stack_drifted", `name="drift"`)).To(Equal(0.0))
		}},
		{"ignore", func(t *testing.T) {
			g := NewWithT(t)
			ignore := []v1alpha1.DriftIgnoreRule{{Type: configMapType, Name: "*", Properties: []string{"data.a"}}}
			remediations := len(records(getStack(g, key), v1alpha1.OperationRemediate))

			// An ignored key alone: no drift, nothing restored.
			patchObject(t, configMapRef(f.ns, "drift-first"), `{"data":{"a":"scaled-by-hand"}}`)
			s := driftCheck(t, key, map[string]any{"driftDetection": map[string]any{"mode": v1alpha1.DriftRemediate, "ignore": ignore}})
			expectDrifted(g, s, metav1.ConditionFalse, v1alpha1.NoDriftReason)
			g.Expect(s.Status.Drift.Total).To(BeZero(), "status.drift: %+v", s.Status.Drift)
			g.Expect(s.Status.Drift.Resources).To(BeEmpty())
			g.Expect(records(s, v1alpha1.OperationRemediate)).To(HaveLen(remediations), "no remediate for ignored drift")
			g.Expect(configMapData(g, f.ns, "drift-first")).To(HaveKeyWithValue("a", "scaled-by-hand"))

			// The ignored key and another: only the other is reported and restored.
			events := eventCounts(t, f.ns, key.Name)
			patchObject(t, configMapRef(f.ns, "drift-first"), `{"data":{"a":"scaled-again","b":"edited-by-hand"}}`)
			s = driftCheck(t, key, nil)
			t.Logf("after the check: Drifted %s, status.drift %+v", driftedMessage(s), s.Status.Drift)
			g.Eventually(func(g Gomega) {
				s = getStack(g, key)
				expectDrifted(g, s, metav1.ConditionFalse, v1alpha1.RemediatedReason)
				g.Expect(records(s, v1alpha1.OperationRemediate)).To(HaveLen(remediations + 1))
			}, 2*time.Minute, time.Second).Should(Succeed())
			g.Expect(configMapData(g, f.ns, "drift-first")).To(Equal(map[string]string{"a": "scaled-again", "b": "2", "c": "3"}),
				"b is restored, the ignored a is left as edited")
			rem := records(s, v1alpha1.OperationRemediate)[0]
			g.Expect(rem.Outcome).To(Equal(v1alpha1.OutcomeSucceeded), "remediate: %+v", rem)
			g.Expect(rem.Resources).To(Equal([]string{firstURN}))
			if r := s.Status.Drift.Resources; len(r) > 0 {
				g.Expect(r).To(Equal([]v1alpha1.DriftedResource{{URN: firstURN, Type: configMapType, Name: "first", Op: "update", Properties: []string{"data.b"}}}))
			}
			// What was reported: the DriftDetected event of this check names b, never a.
			var reported []string
			g.Eventually(func() []string {
				reported = nil
				for _, e := range newEvents(events, eventCounts(t, f.ns, key.Name)) {
					if strings.HasPrefix(e, v1alpha1.DriftDetectedReason+": ") {
						reported = append(reported, e)
					}
				}
				return reported
			}, time.Minute, 50*time.Millisecond).Should(HaveLen(1), "one DriftDetected event for this drift")
			g.Expect(reported[0]).To(ContainSubstring("data.b"))
			g.Expect(reported[0]).NotTo(ContainSubstring("data.a"))
			t.Logf("reported: %s", reported[0])
		}},
		{"failed", func(t *testing.T) {
			g := NewWithT(t)
			// Detect, and a retry an hour away: the failing up is not retried on its own.
			patchStack(t, key, map[string]any{"spec": map[string]any{
				"retryInterval":  "1h",
				"driftDetection": map[string]any{"mode": v1alpha1.DriftDetect},
			}})
			broken := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": driftProgram("\n        broken: ${doesNotExist}")}, "broken")
			requestReconcile(t, key)
			s := waitNotReady(t, key, v1alpha1.ProgramErrorReason)
			g.Expect(s.Status.LastAttemptedRevision).To(Equal("main@sha1:" + broken))
			g.Expect(s.Status.LastAppliedRevision).To(Equal(appliedRevision))

			patchObject(t, configMapRef(f.ns, "drift-first"), `{"data":{"c":"edited-by-hand"}}`)
			requested := time.Now()
			s = driftCheck(t, key, nil)
			t.Logf("Ready %s; Drifted %s", readyMessage(s), driftedMessage(s))
			expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
			d := s.Status.Drift
			g.Expect(d.CheckedAt.Time).NotTo(BeTemporally("<", notBefore(requested)), "a check ran after the request")
			g.Expect(d.Revision).To(Equal(appliedRevision), "the check ran at the last applied revision, not at %s", broken)
			g.Expect(d.Resources).To(Equal([]v1alpha1.DriftedResource{{URN: firstURN, Type: configMapType, Name: "first", Op: "update", Properties: []string{"data.c"}}}))
			check := records(s, v1alpha1.OperationDriftCheck)[0]
			g.Expect(check.StartedAt.Time).NotTo(BeTemporally("<", notBefore(requested)), "history: %+v", s.Status.History)
			g.Expect(check.Revision).To(Equal(appliedRevision))
			g.Expect(s.Status.LastAppliedRevision).To(Equal(appliedRevision))
			g.Expect(conditions.GetReason(s, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.ProgramErrorReason), "Ready is still about the failed apply")
			g.Expect(configMapData(g, f.ns, "drift-first")).To(HaveKeyWithValue("c", "edited-by-hand"))
		}},
	}
	for _, step := range steps {
		start := time.Now()
		ok := t.Run(step.name, step.run)
		t.Logf("step %s: %s", step.name, time.Since(start).Round(100*time.Millisecond))
		if !ok {
			t.Fatalf("step %s failed; the later steps build on it", step.name)
		}
	}
}
