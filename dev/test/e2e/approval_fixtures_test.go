package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// approvalProgram owns the ConfigMap approval-managed: its color is in the
// program, and its copied value is read from the file source on the
// controller's host, which no input of the Stack covers: changing it
// changes only what an up would write, so a plan made before it is no
// longer valid. (A `get` of a ConfigMap, the obvious way, makes pulumi-yaml
// v1.25 fail an assertion: it adds the type's apiVersion and kind to the
// get's properties.)
func approvalProgram(color, source string) string {
	return `name: approval
runtime: yaml
config:
  namespace:
    type: string
resources:
  managed:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: approval-managed
        namespace: ${namespace}
      data:
        color: ` + color + `
        copied:
          fn::readFile: ` + source + `
`
}

// approver is the field manager the tests approve as: the approval's
// history record names it (approvedBy, from managedFields).
const approver = "alice"

type approvalFixture struct {
	*fixture
	source string // the file the program copies into approval-managed
}

// newApprovalFixture is newFixture with approvalProgram("blue") at app/ and
// the source file holding "v1".
func newApprovalFixture(t *testing.T) *approvalFixture {
	t.Helper()
	f := &approvalFixture{fixture: newFixture(t), source: filepath.Join(t.TempDir(), "source.txt")}
	f.setSource(t, "v1")
	f.commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": approvalProgram("blue", f.source)}, "approval program")
	return f
}

func (f *approvalFixture) setSource(t *testing.T, value string) {
	t.Helper()
	if err := os.WriteFile(f.source, []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
}

// approvalStack is f.stack without published outputs, in mode.
func (f *fixture) approvalStack(name string, mode v1alpha1.ApprovalMode) *v1alpha1.Stack {
	return f.stack(name, func(s *v1alpha1.Stack) {
		s.Spec.Outputs = nil
		s.Spec.Approval = &v1alpha1.Approval{Mode: mode}
	})
}

// commit commits approvalProgram(color) and asks for a reconcile.
func (f *approvalFixture) commitColor(t *testing.T, key client.ObjectKey, color string) string {
	t.Helper()
	sha := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": approvalProgram(color, f.source)}, color)
	requestReconcile(t, key)
	return sha
}

// approve sets the approve annotation as approver, like
// `kubectl annotate stack NAME stackpilot.dev/approve=ID --overwrite`.
func approve(t *testing.T, key client.ObjectKey, id string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ApproveAnnotation, id)
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := env.Client.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner(approver)); err != nil {
		t.Fatal(err)
	}
}

// waitPlan waits for a pending plan other than notID at revision sha, with
// PlanPending=True for reason, and returns the Stack. The patcher writes the
// conditions before the rest of the status: the condition must name the
// plan that status.pendingPlan holds, and no operation may be running.
func waitPlan(t *testing.T, key client.ObjectKey, sha, notID, reason string) *v1alpha1.Stack {
	t.Helper()
	var last *v1alpha1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStack(g, key)
		last = s
		p := s.Status.PendingPlan
		g.Expect(p).NotTo(BeNil(), "no pending plan; PlanPending: %s; Ready: %s", planPendingMessage(s), readyMessage(s))
		g.Expect(p.ID).NotTo(Equal(notID), "still the old plan")
		g.Expect(p.Revision).To(Equal("main@sha1:" + sha))
		c := conditions.Get(s, v1alpha1.PlanPendingCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "PlanPending: %s", planPendingMessage(s))
		g.Expect(c.Reason).To(Equal(reason), "PlanPending: %s", planPendingMessage(s))
		g.Expect(c.Message).To(ContainSubstring(p.ID))
		g.Expect(s.Status.CurrentOperation).To(BeNil())
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	return last
}

func planPendingMessage(s *v1alpha1.Stack) string {
	c := conditions.Get(s, v1alpha1.PlanPendingCondition)
	if c == nil {
		return "<no PlanPending condition>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// planDir is where the controller keeps plan id of the Stack.
func (f *fixture) planDir(s *v1alpha1.Stack, id string) string {
	return filepath.Join(f.dataDir, "plans", string(s.UID), id)
}

// getPlan GETs a path of the controller's /plans endpoint (HTTPS, beside the
// logs) as a ServiceAccount that may get the namespace's Stacks, and decodes it.
func (f *fixture) getPlan(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+f.ctrl.LogsAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Stackpilot-Token", stackReaderToken(t, f.ns))
	resp, err := insecureTLSClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, body
}

// planned finds the resource of the plan whose URN ends in suffix.
func planned(p *v1alpha1.PendingPlan, suffix string) *v1alpha1.PlannedResource {
	for i, r := range p.Resources {
		if strings.HasSuffix(r.URN, suffix) {
			return &p.Resources[i]
		}
	}
	return nil
}

// managedCM is the suffix of the URN of approval-managed.
const managedCM = "::" + configMapType + "::managed"
