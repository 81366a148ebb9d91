package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// driftCLI runs the built CLI against the test API server in namespace ns
// and returns stdout, stderr and the exit code.
func driftCLI(t *testing.T, ns string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	args = append([]string{"--kubeconfig", env.Kubeconfig, "-n", ns}, args...)
	stdout, stderr, err := runCLI(t, args...)
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("stackpilot %s: %v", strings.Join(args, " "), err)
	}
	return stdout, stderr, code
}

// TestDriftCLIShow prints a drift report the test writes itself through the
// status subresource (no controller runs), in every output format, and the
// errors of a Stack that is not where the user looks.
func TestDriftCLIShow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	s := f.stack("drift-cli-web", func(s *v1alpha1.Stack) {
		s.Spec.DriftDetection = &v1alpha1.DriftDetection{Mode: v1alpha1.DriftDetect, Interval: &metav1.Duration{Duration: 10 * time.Minute}}
	})
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())

	// Before any check.
	out, errOut, code := driftCLI(t, f.ns, "drift", "show", s.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("Stack:       " + f.ns + "/drift-cli-web (mode Detect, every 10m0s)\n"))
	g.Expect(out).To(ContainSubstring("no drift check yet (nothing applied yet: checks start after the first apply)"))

	// A report as the controller writes it.
	checked := metav1.NewTime(time.Now().Add(-2 * time.Minute).Truncate(time.Second))
	next := metav1.NewTime(time.Now().Add(8 * time.Minute).Truncate(time.Second))
	s.Status.LastAppliedRevision = "main@sha1:" + f.commit
	s.Status.Drift = &v1alpha1.DriftStatus{
		CheckedAt: &checked, NextCheckAt: &next, Revision: s.Status.LastAppliedRevision, Total: 2,
		Resources: []v1alpha1.DriftedResource{
			{URN: "urn:pulumi:drift-cli-web::bridge::kubernetes:core/v1:ConfigMap::settings", Type: "kubernetes:core/v1:ConfigMap", Name: "settings", Op: "update", Properties: []string{"data.color", "data.size"}},
			{URN: "urn:pulumi:drift-cli-web::bridge::kubernetes:core/v1:Secret::token", Type: "kubernetes:core/v1:Secret", Name: "token", Op: "delete"},
		},
	}
	s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.DriftedCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.DriftDetectedReason,
		Message: "2 resource(s) drifted: settings (data.color, data.size), token (deleted)", LastTransitionTime: checked}}
	g.Expect(env.Client.Status().Update(ctx, s)).To(Succeed())

	out, errOut, code = driftCLI(t, f.ns, "drift", "show", s.Name)
	g.Expect(code).To(Equal(0), "show exits 0 on drift; stderr: %s", errOut)
	g.Expect(out).To(ContainSubstring("Drifted:     True (DriftDetected): 2 resource(s) drifted: settings (data.color, data.size), token (deleted)\n"))
	g.Expect(out).To(ContainSubstring("Checked at:  " + checked.UTC().Format(time.RFC3339) + " (2m ago)\n"))
	g.Expect(out).To(ContainSubstring("Revision:    main@sha1:" + f.commit + "\n"))
	g.Expect(out).To(MatchRegexp(`Next check:  \S+ \(in [78]m\)\n`))
	g.Expect(out).To(ContainSubstring("Total:       2 drifted resource(s)\n"))
	g.Expect(out).To(MatchRegexp(`(?m)^settings +kubernetes:core/v1:ConfigMap +update +data\.color, data\.size$`))
	g.Expect(out).To(MatchRegexp(`(?m)^token +kubernetes:core/v1:Secret +delete +-$`))

	out, errOut, code = driftCLI(t, f.ns, "drift", "show", s.Name, "-o", "json")
	g.Expect(code).To(Equal(0), errOut)
	var report struct {
		Total     int64                      `json:"total"`
		Resources []v1alpha1.DriftedResource `json:"resources"`
		Condition struct{ Status, Reason string }
	}
	g.Expect(json.Unmarshal([]byte(out), &report)).To(Succeed(), out)
	g.Expect(report.Total).To(Equal(int64(2)))
	g.Expect(report.Resources).To(Equal(s.Status.Drift.Resources))
	g.Expect(report.Condition.Reason).To(Equal(v1alpha1.DriftDetectedReason))

	out, _, code = driftCLI(t, f.ns, "drift", "show", s.Name, "-o", "yaml")
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(ContainSubstring("- data.color\n"))

	// Not where the user looks: the namespace it is in, or the close name.
	other := env.Namespace(t)
	_, errOut, code = driftCLI(t, other, "drift", "show", s.Name)
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(Equal(fmt.Sprintf("stackpilot: no Stack drift-cli-web in namespace %s; did you mean -n %s?\n", other, f.ns)))
	_, errOut, code = driftCLI(t, f.ns, "drift", "check", "drift-cli-wbe")
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(Equal(fmt.Sprintf("stackpilot: no Stack drift-cli-wbe in namespace %s; did you mean drift-cli-web?\n", f.ns)))

	// The shell completes Stack names from the namespace.
	out, _, code = driftCLI(t, f.ns, "__complete", "drift", "show", "drift-cli")
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(HavePrefix("drift-cli-web\n:4\n"))

	// No controller: check writes the request, then says what to look at.
	_, errOut, code = driftCLI(t, f.ns, "drift", "check", s.Name, "--timeout", "3s")
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(ContainSubstring("timed out after 3s waiting for the controller to handle drift-"))
	g.Expect(errOut).To(ContainSubstring("is stackpilot-controller running and watching namespace " + f.ns + "?"))
	g.Expect(getStack(g, client.ObjectKeyFromObject(s)).Annotations[v1alpha1.ReconcileRequestAnnotation]).To(HavePrefix(v1alpha1.DriftCheckRequestPrefix))

	_, errOut, code = driftCLI(t, f.ns, "drift", "check", s.Name, "--wait=false")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(ContainSubstring("Requested a drift check of Stack " + f.ns + "/drift-cli-web (drift-"))
}

// TestDriftCLICheck runs `drift check` against the controller: clean after
// the apply (exit 0), drifted after a PATCH of the program's ConfigMap
// (exit 3, the resource and the path named, never the value), repaired in
// mode Remediate (exit 0).
func TestDriftCLICheck(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	s := f.stack("drift-cli", func(s *v1alpha1.Stack) {
		s.Spec.Outputs = nil
		s.Spec.DriftDetection = &v1alpha1.DriftDetection{Mode: v1alpha1.DriftDetect, Interval: &metav1.Duration{Duration: time.Hour}}
	})
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	key := client.ObjectKeyFromObject(s)
	waitApplied(t, key, f.commit)

	out, errOut, code := driftCLI(t, f.ns, "drift", "check", s.Name, "--timeout", "3m")
	g.Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(ContainSubstring("Drifted:     False (NoDrift)"))
	g.Expect(out).To(ContainSubstring("Total:       0 drifted resource(s)\n"))
	g.Expect(out).To(ContainSubstring("Revision:    main@sha1:" + f.commit + "\n"))

	const value = "painted-by-hand-7f3a"
	patch := fmt.Sprintf(`{"data":{"color":%q}}`, value)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-settings"}}
	g.Expect(env.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())

	out, errOut, code = driftCLI(t, f.ns, "drift", "check", s.Name, "--timeout", "3m")
	g.Expect(code).To(Equal(3), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(ContainSubstring("Drifted:     True (DriftDetected)"))
	g.Expect(out).To(ContainSubstring("Total:       1 drifted resource(s)\n"))
	g.Expect(out).To(MatchRegexp(`(?m)^settings +kubernetes:core/v1:ConfigMap +update +data\.color$`))
	g.Expect(errOut).To(ContainSubstring("stackpilot: Stack " + f.ns + "/drift-cli drifted: 1 resource(s)\n"))
	g.Expect(out + errOut).NotTo(ContainSubstring(value))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", value), "Detect changes nothing")

	// drift show prints the same report and exits 0.
	shown, errOut, code := driftCLI(t, f.ns, "drift", "show", s.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(shown).To(ContainSubstring("Total:       1 drifted resource(s)\n"))

	// In mode Remediate the check repairs what it found: exit 0, Remediated.
	// The drift is a deletion here: an edited field stays owned by its editor's
	// field manager, and the provider's server-side apply does not force it.
	g.Expect(env.Client.Delete(ctx, cm)).To(Succeed())
	s = getStack(g, key)
	before := s.DeepCopy()
	s.Spec.DriftDetection.Mode = v1alpha1.DriftRemediate
	g.Expect(env.Client.Patch(ctx, s, client.MergeFrom(before))).To(Succeed())
	out, errOut, code = driftCLI(t, f.ns, "drift", "check", s.Name, "--timeout", "3m")
	g.Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(ContainSubstring("Drifted:     False (Remediated): remediated: restored 1 resource(s): settings"))
	g.Expect(out).To(ContainSubstring("Total:       0 drifted resource(s)\n"))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
}
