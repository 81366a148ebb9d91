package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// configMapType is the Pulumi type token of a Kubernetes ConfigMap.
const configMapType = "kubernetes:core/v1:ConfigMap"

// driftProgram owns two ConfigMaps, "first" (drift-first: a, b, c) and
// "second" (drift-second: x), that the drift tests edit and delete by hand.
// extraData is added to first's data (a broken reference makes a program error).
func driftProgram(extraData string) string {
	return `name: drift
runtime: yaml
config:
  namespace:
    type: string
resources:
  first:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: drift-first
        namespace: ${namespace}
      data:
        a: "1"
        b: "2"
        c: "3"` + extraData + `
  second:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: drift-second
        namespace: ${namespace}
      data:
        x: "1"
`
}

// secretProgram owns a Secret whose value comes from secret config (the
// Stack's configFrom Secret).
const secretProgram = `name: driftsecret
runtime: yaml
config:
  namespace:
    type: string
  token:
    type: string
resources:
  credentials:
    type: kubernetes:core/v1:Secret
    properties:
      metadata:
        name: drift-credentials
        namespace: ${namespace}
      stringData:
        token: ${token}
`

// tinyProgram has no resource: its up and its refresh preview cost the least
// a Pulumi run can, which is what the spread test needs.
const tinyProgram = `name: tiny
runtime: yaml
config:
  namespace:
    type: string
outputs:
  ok: "yes"
`

// newDriftFixture is newFixture with program committed at app/ instead of the
// bridge program; f.commit is that commit.
func newDriftFixture(t *testing.T, program string) *fixture {
	t.Helper()
	f := newFixture(t)
	f.commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": program}, "drift program")
	return f
}

// driftStack is f.stack without published outputs and with drift detection set.
func (f *fixture) driftStack(name string, drift v1alpha1.DriftDetection, mutate ...func(*v1alpha1.Stack)) *v1alpha1.Stack {
	return f.stack(name, append([]func(*v1alpha1.Stack){func(s *v1alpha1.Stack) {
		s.Spec.Outputs = nil
		s.Spec.DriftDetection = &drift
	}}, mutate...)...)
}

// logOnFailure shows the end of the controller's log when the test failed.
func logOnFailure(t *testing.T, f *fixture) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log (last 60 lines):\n%s", testenv.TailFile(f.ctrl.LogPath, 60))
		}
	})
}

// patchStack merge-patches the Stack with the JSON of patch.
func patchStack(t *testing.T, key client.ObjectKey, patch map[string]any) {
	t.Helper()
	raw, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := env.Client.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, raw)); err != nil {
		t.Fatal(err)
	}
}

// requestDriftCheck asks for a drift check now, together with the spec
// changes in spec (nil for none), in ONE patch: the reconcile that handles the
// request sees the new spec, whatever the order the controller reads them in.
// It returns the value to wait for in status.lastHandledReconcileAt.
func requestDriftCheck(t *testing.T, key client.ObjectKey, spec map[string]any) string {
	t.Helper()
	value := v1alpha1.DriftCheckRequestPrefix + time.Now().UTC().Format(time.RFC3339Nano)
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.ReconcileRequestAnnotation: value}}}
	if spec != nil {
		patch["spec"] = spec
	}
	patchStack(t, key, patch)
	return value
}

// driftCheck requests a drift check and waits until the controller handled it.
func driftCheck(t *testing.T, key client.ObjectKey, spec map[string]any) *v1alpha1.Stack {
	t.Helper()
	return waitHandled(t, key, requestDriftCheck(t, key, spec))
}

// patchObject merge-patches a ConfigMap or Secret as `kubectl patch --type
// merge` does: the drift the tests make happens outside Pulumi, in the API server.
func patchObject(t *testing.T, obj client.Object, patch string) {
	t.Helper()
	if err := env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func configMapRef(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// expectDrifted checks the Drifted condition's status and reason.
func expectDrifted(g Gomega, s *v1alpha1.Stack, status metav1.ConditionStatus, reason string) {
	c := conditions.Get(s, v1alpha1.DriftedCondition)
	g.Expect(c).NotTo(BeNil(), "no Drifted condition; conditions: %v", s.Status.Conditions)
	g.Expect(c.Status).To(Equal(status), "Drifted: %s/%s: %s", c.Status, c.Reason, c.Message)
	g.Expect(c.Reason).To(Equal(reason), "Drifted: %s/%s: %s", c.Status, c.Reason, c.Message)
}

func driftedMessage(s *v1alpha1.Stack) string {
	c := conditions.Get(s, v1alpha1.DriftedCondition)
	if c == nil {
		return "<no Drifted condition>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// records returns the history records of type typ, newest first.
func records(s *v1alpha1.Stack, typ v1alpha1.OperationType) []v1alpha1.OperationRecord {
	var out []v1alpha1.OperationRecord
	for _, r := range s.Status.History {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// eventCounts counts the events about a Stack by "Reason: Message". The
// event recorder folds a repeated event into one object with a count, so the
// counts, not the objects, say how often something was reported.
func eventCounts(t *testing.T, ns, name string) map[string]int {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range list.Items {
		if e.InvolvedObject.Name != name || e.InvolvedObject.Kind != "Stack" {
			continue
		}
		n := int(e.Count)
		if e.Series != nil && int(e.Series.Count) > n {
			n = int(e.Series.Count)
		}
		out[e.Reason+": "+e.Message] += max(n, 1)
	}
	return out
}

// countReason sums the counts of the events with reason.
func countReason(counts map[string]int, reason string) int {
	n := 0
	for k, c := range counts {
		if strings.HasPrefix(k, reason+": ") {
			n += c
		}
	}
	return n
}

// newEvents are the events in after that are not (or not as often) in before.
func newEvents(before, after map[string]int) []string {
	var out []string
	for k, c := range after {
		if c > before[k] {
			out = append(out, k)
		}
	}
	return out
}

// metric reads one sample sum from the controller's metrics.
func metric(t *testing.T, f *fixture, name string, labels ...string) float64 {
	t.Helper()
	v, err := f.ctrl.Metric(name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// notBefore is t truncated to the second, as metav1.Time serializes it, so
// that a status time set after t compares as not before it.
func notBefore(t time.Time) time.Time { return t.Truncate(time.Second) }
