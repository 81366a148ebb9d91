package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

// planCLI runs the built CLI in namespace ns; it may run in a goroutine (it
// never fails the test itself).
func planCLI(ns string, args ...string) (stdout, stderr string, code int, err error) {
	args = append([]string{"--kubeconfig", env.Kubeconfig, "-n", ns}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code, err = ee.ExitCode(), nil
	}
	return out.String(), errOut.String(), code, err
}

// mustPlanCLI is planCLI on the test goroutine.
func mustPlanCLI(t *testing.T, ns string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cliBinary(t)
	stdout, stderr, code, err := planCLI(ns, args...)
	if err != nil {
		t.Fatalf("stackpilot %s: %v", strings.Join(args, " "), err)
	}
	return stdout, stderr, code
}

// plannedResources are n ConfigMaps the plan would create, cm-0 ... cm-<n-1>.
func plannedResources(stack string, n int) []v1alpha1.PlannedResource {
	res := make([]v1alpha1.PlannedResource, n)
	for i := range res {
		res[i] = v1alpha1.PlannedResource{
			URN:  fmt.Sprintf("urn:pulumi:%s::bridge::kubernetes:core/v1:ConfigMap::cm-%d", stack, i),
			Type: "kubernetes:core/v1:ConfigMap", Op: "create",
		}
	}
	res[0].Op, res[0].Properties = "update", []string{"data.color"}
	return res
}

// setPendingPlan writes status.pendingPlan as the controller would: the
// first 50 of the plan's resources, and its total.
func setPendingPlan(g Gomega, key client.ObjectKey, d *plan.Document) {
	s := getStack(g, key)
	s.Status.LastAppliedRevision = "main@sha1:0ld"
	s.Status.PendingPlan = &v1alpha1.PendingPlan{
		ID: d.ID, Revision: d.Revision, InputsDigest: d.InputsDigest, CreatedAt: metav1.NewTime(d.CreatedAt),
		Changes: d.Changes, Total: int64(len(d.Resources)), Resources: d.Resources[:min(len(d.Resources), v1alpha1.MaxPlanResources)],
	}
	g.Expect(env.Client.Status().Update(context.Background(), s)).To(Succeed())
}

// planDocument is a plan of 60 resources for Stack s.
func planDocument(s *v1alpha1.Stack, id string) *plan.Document {
	res := plannedResources(s.GetStackName(), 60)
	return &plan.Document{
		APIVersion: plan.APIVersion, ID: id, Namespace: s.Namespace, Name: s.Name, StackName: s.GetStackName(),
		Revision: "main@sha1:n3w", InputsDigest: "sha256:1n", CreatedAt: time.Now().Add(-time.Minute).Truncate(time.Second).UTC(),
		Mode: v1alpha1.ApprovalManual, Changes: v1alpha1.ChangeSummary{Create: 59, Update: 1}, Same: 2, Resources: res,
	}
}

// servePlans answers as the controller's /plans endpoint does: d at its
// path, a JSON 404 otherwise.
func servePlans(d *plan.Document) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != fmt.Sprintf("/plans/%s/%s/%s", d.Namespace, d.Name, d.ID) {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "no plan at " + r.URL.Path})
			return
		}
		_ = json.NewEncoder(w).Encode(d)
	})
}

// TestPlanCLI prints a pending plan the test writes through the status
// subresource (no controller runs): in full from a server answering as the
// controller, directly and through the API server's service proxy, and from
// status.pendingPlan when the controller cannot be reached.
func TestPlanCLI(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	s := f.stack("plan-cli", func(s *v1alpha1.Stack) { s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual} })
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	key := client.ObjectKeyFromObject(s)

	_, errOut, code := mustPlanCLI(t, f.ns, "plan", s.Name)
	g.Expect(code).To(Equal(3), errOut)
	g.Expect(errOut).To(Equal(fmt.Sprintf("stackpilot: Stack %s/plan-cli has no pending plan: nothing is applied yet and no plan is made yet; see `kubectl describe stack plan-cli -n %s`\n", f.ns, f.ns)))

	d := planDocument(s, "p-4e1f")
	setPendingPlan(g, key, d)
	ctrl := httptest.NewServer(servePlans(d))
	defer ctrl.Close()

	// In full, from --controller-url: every resource, nothing on stderr.
	out, errOut, code := mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-url", ctrl.URL)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(BeEmpty())
	g.Expect(out).To(HavePrefix("Previewing update (plan-cli)\n\nStack:     " + f.ns + "/plan-cli (approval Manual)\nRevision:  main@sha1:n3w\nPlan:      p-4e1f made "))
	g.Expect(out).To(MatchRegexp(`(?m)^     pulumi:pulumi:Stack +bridge-plan-cli$`))
	g.Expect(out).To(MatchRegexp(`(?m)^ ~   ├─ kubernetes:core/v1:ConfigMap +cm-0 +update +\[diff: ~data\.color\]$`))
	g.Expect(out).To(MatchRegexp(`(?m)^ \+   └─ kubernetes:core/v1:ConfigMap +cm-59 +create$`))
	g.Expect(out).To(ContainSubstring("Resources:\n    + 59 to create\n    ~ 1 to update\n    60 changes. 2 unchanged\n"))
	g.Expect(out).To(HaveSuffix("\nTo apply exactly this plan: stackpilot approve plan-cli -n " + f.ns + " --plan p-4e1f\n"))
	g.Expect(out).NotTo(ContainSubstring("\x1b"), "no colour on a pipe")

	out, errOut, code = mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-url", ctrl.URL, "-o", "json")
	g.Expect(code).To(Equal(0), errOut)
	var got plan.Document
	g.Expect(json.Unmarshal([]byte(out), &got)).To(Succeed(), out)
	g.Expect(got.Resources).To(HaveLen(60))
	g.Expect(got.ID).To(Equal("p-4e1f"))
	g.Expect(got.Same).To(Equal(int64(2)))

	// Nobody listening: status.pendingPlan, its first 50, said on stderr.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	out, errOut, code = mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-url", closed.URL)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(HavePrefix("warning: could not read the full plan: reaching the controller at " + closed.URL + ": "))
	g.Expect(errOut).To(HaveSuffix("; showing status.pendingPlan instead (the first 50 of 60 resources)\n"))
	g.Expect(out).To(MatchRegexp(`(?m)^ \+   └─ kubernetes:core/v1:ConfigMap +cm-49 +create$`))
	g.Expect(out).NotTo(ContainSubstring("cm-50"))
	g.Expect(out).To(ContainSubstring("    ... and 10 more resource(s) not listed\n\nResources:\n    + 59 to create\n    ~ 1 to update\n    60 changes\n"))

	// The controller runs but no longer has the plan (say, its data dir was lost).
	other := planDocument(s, "p-0ther")
	gone := httptest.NewServer(servePlans(other))
	defer gone.Close()
	_, errOut, code = mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-url", gone.URL)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(Equal(fmt.Sprintf("warning: the controller at %s has no such plan: no plan at /plans/%s/plan-cli/p-4e1f; showing status.pendingPlan instead (the first 50 of 60 resources)\n", gone.URL, f.ns)))

	// Through the service proxy, with no such Service: the fallback, saying
	// what to check.
	_, errOut, code = mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-namespace", f.ns)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(ContainSubstring(fmt.Sprintf("warning: could not read the full plan: no service %s/stackpilot-controller (port logs) through the API server: is Stackpilot installed there?", f.ns)))

	t.Run("service proxy", func(t *testing.T) {
		g := NewWithT(t)
		ip := hostIP(t)
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		g.Expect(err).NotTo(HaveOccurred())
		srv := httptest.NewUnstartedServer(servePlans(d))
		srv.Listener = ln
		srv.StartTLS() // the logs listener is HTTPS
		defer srv.Close()
		port := int32(ln.Addr().(*net.TCPAddr).Port)
		// The Service of config/manager, its endpoint the test's server.
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "stackpilot-controller"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "logs", Port: 9443, TargetPort: intstr.FromInt32(port)}}},
		}
		g.Expect(env.Client.Create(ctx, svc)).To(Succeed())
		// The API server's service proxy dials only an endpoint that is a
		// Pod's IP: a Pod (never scheduled) carries the test server's.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "default"}}
		if err := env.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "stackpilot-controller-0"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "stackpilot-controller"}}},
		}
		g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
		pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
		// The API server's service proxy reads v1 Endpoints.
		//lint:ignore SA1019 the API server's service proxy reads v1 Endpoints
		subsets := []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: ip, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: f.ns, Name: pod.Name}}},
			Ports:     []corev1.EndpointPort{{Name: "logs", Port: port}},
		}}
		//lint:ignore SA1019 the API server's service proxy reads v1 Endpoints
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "stackpilot-controller"}, Subsets: subsets}
		g.Expect(env.Client.Create(ctx, ep)).To(Succeed())
		out, errOut, code := mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-namespace", f.ns)
		g.Expect(code).To(Equal(0), errOut)
		g.Expect(errOut).To(BeEmpty())
		g.Expect(out).To(MatchRegexp(`(?m)^ \+   └─ kubernetes:core/v1:ConfigMap +cm-59 +create$`))
		g.Expect(out).To(ContainSubstring("60 changes. 2 unchanged\n"))
	})
}

// hostIP is an address of this machine the API server may proxy to: not
// loopback (Endpoints refuse it).
func hostIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address: the API server cannot proxy to this machine")
	return ""
}

// TestApproveCLI approves a pending plan the test writes through the status
// subresource (no controller runs): the refusals (stale id, PreviewOnly,
// Auto, nothing pending) change nothing; an approval is a patch of the one
// annotation by field manager "stackpilot"; --wait reports the up the test
// then records as the controller would, or the plan that replaced it.
func TestApproveCLI(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	s := f.stack("approve-cli", func(s *v1alpha1.Stack) {
		s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
		s.Annotations = map[string]string{"team": "platform"}
	})
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	key := client.ObjectKeyFromObject(s)

	_, errOut, code := mustPlanCLI(t, f.ns, "approve", s.Name)
	g.Expect(code).To(Equal(3), errOut)
	g.Expect(errOut).To(ContainSubstring("has no pending plan"))

	d := planDocument(s, "p-1")
	setPendingPlan(g, key, d)
	made := d.CreatedAt.Format(time.RFC3339)

	_, errOut, code = mustPlanCLI(t, f.ns, "approve", s.Name, "--plan", "p-0")
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(Equal(fmt.Sprintf("stackpilot: plan p-0 is not the pending plan (p-1 is, made at revision main@sha1:n3w at %s): run `stackpilot plan approve-cli -n %s` to review it, then approve it with --plan p-1\n", made, f.ns)))
	g.Expect(getStack(g, key).Annotations).NotTo(HaveKey(v1alpha1.ApproveAnnotation))

	for mode, want := range map[v1alpha1.ApprovalMode]string{
		v1alpha1.ApprovalPreviewOnly: "is PreviewOnly: its plan p-1 is shown, never applied, so it cannot be approved",
		v1alpha1.ApprovalAuto:        "has nothing to approve: its approval mode is Auto",
	} {
		setMode(g, key, mode)
		_, errOut, code = mustPlanCLI(t, f.ns, "approve", s.Name, "--plan", "p-1")
		g.Expect(code).To(Equal(1), errOut)
		g.Expect(errOut).To(ContainSubstring(want))
		g.Expect(getStack(g, key).Annotations).NotTo(HaveKey(v1alpha1.ApproveAnnotation))
	}
	setMode(g, key, v1alpha1.ApprovalManual)

	// Installed under another name (a kubectl plugin), the CLI still writes
	// as field manager "stackpilot": without an explicit one the API server
	// would name the manager after the binary.
	plugin := filepath.Join(t.TempDir(), "kubectl-stackpilot")
	g.Expect(os.Symlink(cliBin, plugin)).To(Succeed())
	cmd := exec.Command(plugin, "--kubeconfig", env.Kubeconfig, "-n", f.ns, "approve", s.Name, "--plan", "p-1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred(), stderr.String())
	g.Expect(string(out)).To(Equal(fmt.Sprintf("Approved plan p-1 of Stack %s/approve-cli (revision main@sha1:n3w: 59 to create, 1 to update).\n", f.ns)))
	approved := getStack(g, key)
	g.Expect(approved.Annotations).To(Equal(map[string]string{"team": "platform", v1alpha1.ApproveAnnotation: "p-1"}))
	g.Expect(approveManager(approved)).To(Equal("stackpilot"), "the controller names the approver from managedFields")

	// Again: nothing written, the approval stands.
	again, errOut, code := mustPlanCLI(t, f.ns, "approve", s.Name, "--plan", "p-1")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(again).To(HavePrefix("Already approved: plan p-1 of Stack "))
	g.Expect(getStack(g, key).ResourceVersion).To(Equal(approved.ResourceVersion))

	// The shell completes --plan with the pending id.
	completed, _, code := mustPlanCLI(t, f.ns, "__complete", "approve", s.Name, "--plan", "")
	g.Expect(code).To(Equal(0))
	g.Expect(completed).To(HavePrefix("p-1\tat main@sha1:n3w: 59 to create, 1 to update\n"))

	// --wait: the test records the up of the plan as the controller does.
	d2 := planDocument(s, "p-2")
	setPendingPlan(g, key, d2)
	done := waitCLI(f.ns, "approve", s.Name, "--wait", "--timeout", "1m")
	waitAnnotation(g, key, "p-2")
	recordUp(g, key, v1alpha1.OperationRecord{ID: "up-7", Type: v1alpha1.OperationUp, Plan: "p-2", Revision: d2.Revision,
		Outcome: v1alpha1.OutcomeSucceeded, ApprovedBy: "stackpilot", Changes: &d2.Changes}, nil)
	r := <-done
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(r.stdout).To(HaveSuffix(fmt.Sprintf("Applied plan p-2 to Stack %s/approve-cli at revision main@sha1:n3w: 59 to create, 1 to update (up up-7, approved by stackpilot).\n", f.ns)))

	// A failed up of the plan is a failure.
	setPendingPlan(g, key, planDocument(s, "p-3"))
	done = waitCLI(f.ns, "approve", s.Name, "--plan", "p-3", "--wait", "--timeout", "1m")
	waitAnnotation(g, key, "p-3")
	recordUp(g, key, v1alpha1.OperationRecord{ID: "up-8", Type: v1alpha1.OperationUp, Plan: "p-3", Revision: d2.Revision,
		Outcome: v1alpha1.OutcomeFailed, Reason: v1alpha1.PlanInvalidReason, Message: "the plan is no longer valid: resource cm-3 changed"},
		&v1alpha1.PendingPlan{ID: "p-3b", Revision: d2.Revision, InputsDigest: "sha256:1n", CreatedAt: metav1.Now()})
	r = <-done
	g.Expect(r.code).To(Equal(1), r.stdout)
	g.Expect(r.stderr).To(HaveSuffix(fmt.Sprintf("stackpilot: the up of plan p-3 on Stack %s/approve-cli failed (up up-8), PlanInvalid: the plan is no longer valid: resource cm-3 changed; plan p-3b is pending now: review it with `stackpilot plan approve-cli -n %s`\n", f.ns, f.ns)))

	// A new plan replaces the approved one before its up: nothing applies.
	setPendingPlan(g, key, planDocument(s, "p-4"))
	done = waitCLI(f.ns, "approve", s.Name, "--wait", "--timeout", "1m")
	waitAnnotation(g, key, "p-4")
	setPendingPlan(g, key, planDocument(s, "p-5"))
	r = <-done
	g.Expect(r.code).To(Equal(1), r.stdout)
	g.Expect(r.stderr).To(ContainSubstring("plan p-4 was replaced by plan p-5 (revision main@sha1:n3w) before it was applied, so the approval applies nothing"))
}

type cliResult struct {
	stdout, stderr string
	code           int
	err            error
}

// waitCLI starts the CLI and returns its result when it ends.
func waitCLI(ns string, args ...string) <-chan cliResult {
	done := make(chan cliResult, 1)
	go func() {
		var r cliResult
		r.stdout, r.stderr, r.code, r.err = planCLI(ns, args...)
		done <- r
	}()
	return done
}

func waitAnnotation(g Gomega, key client.ObjectKey, id string) {
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, key).Annotations).To(HaveKeyWithValue(v1alpha1.ApproveAnnotation, id))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// recordUp writes what the controller writes after the up of an approved
// plan: its record first in the history, and the next pending plan (nil,
// unless the plan was no longer valid and a new one is made).
func recordUp(g Gomega, key client.ObjectKey, rec v1alpha1.OperationRecord, next *v1alpha1.PendingPlan) {
	s := getStack(g, key)
	now := metav1.Now()
	rec.StartedAt, rec.FinishedAt = now, &now
	s.Status.History = append([]v1alpha1.OperationRecord{rec}, s.Status.History...)
	s.Status.PendingPlan = next
	g.Expect(env.Client.Status().Update(context.Background(), s)).To(Succeed())
}

func setMode(g Gomega, key client.ObjectKey, mode v1alpha1.ApprovalMode) {
	s := getStack(g, key)
	before := s.DeepCopy()
	s.Spec.Approval = &v1alpha1.Approval{Mode: mode}
	g.Expect(env.Client.Patch(context.Background(), s, client.MergeFrom(before))).To(Succeed())
}

// approveManager is the field manager that owns the approve annotation.
func approveManager(s *v1alpha1.Stack) string {
	for _, m := range s.ManagedFields {
		if m.FieldsV1 != nil && strings.Contains(m.FieldsV1.GetRawString(), `"f:`+v1alpha1.ApproveAnnotation+`"`) {
			return m.Manager
		}
	}
	return ""
}

// TestPlanCLIController reviews and approves plans the real controller
// made: the full plan read from its /plans endpoint, approved with --wait
// until its up ended; then a second commit's update plan, a refused stale
// id, and nothing pending once it is applied.
func TestPlanCLIController(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	s := f.stack("plan-ctl", func(s *v1alpha1.Stack) {
		s.Spec.Outputs = nil
		s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
	})
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	key := client.ObjectKeyFromObject(s)
	ctrlURL := "https://" + f.ctrl.LogsAddr

	first := waitPendingPlan(t, key, f.commit, "")
	out, errOut, code := mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-url", ctrlURL, "--insecure-skip-tls-verify", "--token", stackReaderToken(t, f.ns))
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(BeEmpty())
	g.Expect(out).To(HavePrefix("Previewing update (plan-ctl)\n"))
	g.Expect(out).To(ContainSubstring("Revision:  main@sha1:" + f.commit + "\nPlan:      " + first.ID + " made "))
	g.Expect(out).To(MatchRegexp(`(?m)^ \+   └─ kubernetes:core/v1:ConfigMap +settings +create$`))
	g.Expect(out).NotTo(ContainSubstring("pulumi:providers:"), "Pulumi shows no default provider")
	g.Expect(out).To(ContainSubstring("To apply exactly this plan: stackpilot approve plan-ctl -n " + f.ns + " --plan " + first.ID + "\n"))
	out, errOut, code = mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-url", ctrlURL, "--insecure-skip-tls-verify", "--token", stackReaderToken(t, f.ns), "-o", "json")
	g.Expect(code).To(Equal(0), errOut)
	var d plan.Document
	g.Expect(json.Unmarshal([]byte(out), &d)).To(Succeed(), out)
	g.Expect(d.ID).To(Equal(first.ID))
	g.Expect(d.Changes).To(Equal(first.Changes))
	g.Expect(int64(len(d.Resources))).To(Equal(first.Total))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &corev1.ConfigMap{})).NotTo(Succeed(), "a pending plan applies nothing")

	out, errOut, code = mustPlanCLI(t, f.ns, "approve", s.Name, "--plan", first.ID, "--wait", "--timeout", "3m")
	g.Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("Applied plan %s to Stack %s/plan-ctl at revision main@sha1:%s: ", first.ID, f.ns, f.commit)))
	g.Expect(out).To(MatchRegexp(`\(up \S+, approved by stackpilot\)\.\n$`))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))

	// A second commit: an update plan, with the changed path.
	second := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: large")}, "size")
	requestReconcile(t, key)
	next := waitPendingPlan(t, key, second, first.ID)
	out, errOut, code = mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-url", ctrlURL, "--insecure-skip-tls-verify", "--token", stackReaderToken(t, f.ns))
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(MatchRegexp(`(?m)^ ~   [├└]─ kubernetes:core/v1:ConfigMap +settings +update +\[diff: ~data\.size\]$`))
	g.Expect(out).To(ContainSubstring("Resources:\n    ~ 1 to update\n"))

	_, errOut, code = mustPlanCLI(t, f.ns, "approve", s.Name, "--plan", first.ID)
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(ContainSubstring(fmt.Sprintf("plan %s is not the pending plan (%s is, made at revision main@sha1:%s", first.ID, next.ID, second)))

	out, errOut, code = mustPlanCLI(t, f.ns, "approve", s.Name, "--wait", "--timeout", "3m")
	g.Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("Applied plan %s to Stack %s/plan-ctl at revision main@sha1:%s: 1 to update", next.ID, f.ns, second)))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "large"))

	_, errOut, code = mustPlanCLI(t, f.ns, "plan", s.Name, "--controller-url", ctrlURL, "--insecure-skip-tls-verify", "--token", stackReaderToken(t, f.ns))
	g.Expect(code).To(Equal(3), errOut)
	g.Expect(errOut).To(Equal(fmt.Sprintf("stackpilot: Stack %s/plan-ctl has no pending plan: it is up to date at revision main@sha1:%s\n", f.ns, second)))
}

// waitPendingPlan waits until the controller made a plan other than notID
// at revision sha and runs nothing.
func waitPendingPlan(t *testing.T, key client.ObjectKey, sha, notID string) *v1alpha1.PendingPlan {
	t.Helper()
	var p *v1alpha1.PendingPlan
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStack(g, key)
		p = s.Status.PendingPlan
		g.Expect(p).NotTo(BeNil(), "no pending plan; Ready: %s", readyMessage(s))
		g.Expect(p.ID).NotTo(Equal(notID))
		g.Expect(p.Revision).To(Equal("main@sha1:" + sha))
		g.Expect(s.Status.CurrentOperation).To(BeNil())
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	return p
}
