package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// updateGolden rewrites the golden files of the CLI's views from what the
// CLI prints now: go test ./test/e2e -run TestCLIViews -update. Review the
// diff before committing it.
var updateGolden = flag.Bool("update", false, "rewrite test/e2e/testdata/cli/*.golden from the CLI's output")

// viewsNamespace makes a namespace named prefix plus 8 random hex digits,
// so that golden files can name it prefix + "00000000" (the same width,
// so the columns stay aligned) and namespaces sort by prefix.
func viewsNamespace(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + hex.EncodeToString(b)}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// viewsFixture is two namespaces with Stacks whose status the test writes
// through the status subresource (no controller runs), the outputs objects
// and Events of one, all at times relative to now, so that the tables'
// relative times ("30h") do not vary.
type viewsFixture struct {
	nsA, nsB string
	label    string
	now      time.Time
	web, db  *v1alpha1.Stack
}

func newViewsFixture(t *testing.T) *viewsFixture {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	f := &viewsFixture{nsA: viewsNamespace(t, "views-a-"), nsB: viewsNamespace(t, "views-b-"), now: time.Now().Truncate(time.Second)}
	f.label = f.nsA
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(f.now.Add(-ago)) }
	atp := func(ago time.Duration) *metav1.Time { t := at(ago); return &t }
	stack := func(ns, name string, mutate func(*v1alpha1.Stack)) *v1alpha1.Stack {
		s := &v1alpha1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"e2e.stackpilot.dev/views": f.label}},
			Spec: v1alpha1.StackSpec{
				Source: v1alpha1.StackSource{
					Git: &v1alpha1.GitSource{URL: "https://git.example.com/infra.git", Ref: &v1alpha1.GitRef{Branch: "main"}},
					Dir: "apps/" + name,
				},
				Backend:  "s3://state-bucket/" + name,
				Interval: metav1.Duration{Duration: time.Hour},
			},
		}
		mutate(s)
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
		return s
	}
	const rev = "main@sha1:6f1c2a9e5b7d3c8f0a4e2d1b9c7a5e3f1d0b8a6c"
	const oldRev = "main@sha1:1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
	f.web = stack(f.nsA, "shop-web", func(s *v1alpha1.Stack) {
		s.Spec.Outputs = &v1alpha1.OutputsTarget{SecretName: "shop-web-outputs", ConfigMapName: "shop-web-outputs"}
	})
	f.web.Status = v1alpha1.StackStatus{
		ObservedGeneration: f.web.Generation,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.SucceededReason, Message: "Applied revision " + rev, LastTransitionTime: at(10 * time.Hour), ObservedGeneration: f.web.Generation},
			{Type: v1alpha1.OutputsPublishedCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.PublishedReason, Message: "Outputs published to Secret shop-web-outputs and ConfigMap shop-web-outputs", LastTransitionTime: at(30 * time.Hour), ObservedGeneration: f.web.Generation},
			{Type: v1alpha1.DriftedCondition, Status: metav1.ConditionFalse, Reason: "NoDrift", Message: "No drift at " + rev, LastTransitionTime: at(9 * time.Hour), ObservedGeneration: f.web.Generation},
		},
		LastAttemptedRevision: rev, LastAppliedRevision: rev,
		InputsDigest: "sha256:9b2e0c1f7a3d4e5b6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3",
		AppliedStack: &v1alpha1.AppliedStack{Backend: "s3://state-bucket/shop-web", StackName: "shop-web"},
		Outputs:      map[string]string{"color": `"blue"`, "port": "8080", "tags": `["a","b"]`, "token": "[secret]"},
		Drift:        &v1alpha1.DriftStatus{CheckedAt: atp(9 * time.Hour), NextCheckAt: atp(8 * time.Hour), Revision: rev},
		History: []v1alpha1.OperationRecord{
			{ID: "op-0003", Type: v1alpha1.OperationUp, Revision: rev, StartedAt: at(10 * time.Hour), FinishedAt: atp(10*time.Hour - 14*time.Second), Outcome: v1alpha1.OutcomeSucceeded, Changes: &v1alpha1.ChangeSummary{Create: 1, Update: 2}, Message: "Applied revision " + rev},
			{ID: "op-0002", Type: v1alpha1.OperationUp, Revision: rev, StartedAt: at(20 * time.Hour), FinishedAt: atp(20*time.Hour - 5*time.Second), Outcome: v1alpha1.OutcomeFailed, Reason: v1alpha1.ProgramErrorReason, Message: "resource settings: configmaps \"app-settings\" is forbidden: User \"system:serviceaccount:infra:deployer\" cannot create resource \"configmaps\""},
			{ID: "op-0001", Type: v1alpha1.OperationUp, Revision: oldRev, StartedAt: at(30 * time.Hour), FinishedAt: atp(30*time.Hour - 21*time.Second), Outcome: v1alpha1.OutcomeSucceeded, Changes: &v1alpha1.ChangeSummary{Create: 3}, Message: "Applied revision " + oldRev},
		},
	}
	g.Expect(env.Client.Status().Update(ctx, f.web)).To(Succeed())

	f.db = stack(f.nsB, "shop-db", func(s *v1alpha1.Stack) {
		s.Spec.Suspend = true
		s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
	})
	f.db.Status = v1alpha1.StackStatus{
		ObservedGeneration: f.db.Generation,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.PlanPendingCondition, Message: "Plan p-7d2e at " + rev + " waits for approval: run `stackpilot plan shop-db` to review it and `stackpilot approve shop-db --plan p-7d2e` to apply it", LastTransitionTime: at(20 * time.Hour), ObservedGeneration: f.db.Generation},
		},
		LastAttemptedRevision: rev, LastAppliedRevision: oldRev,
		PendingPlan:      &v1alpha1.PendingPlan{ID: "p-7d2e", Revision: rev, InputsDigest: "sha256:1n", CreatedAt: at(20 * time.Hour), Changes: v1alpha1.ChangeSummary{Create: 1, Delete: 1}, Total: 2},
		CurrentOperation: &v1alpha1.OperationRecord{ID: "op-0010", Type: v1alpha1.OperationRefresh, Revision: oldRev, StartedAt: at(10 * time.Hour), Outcome: v1alpha1.OutcomeRunning, Changes: &v1alpha1.ChangeSummary{Update: 1}},
	}
	g.Expect(env.Client.Status().Update(ctx, f.db)).To(Succeed())

	// The outputs objects as the controller publishes them.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.nsA, Name: "shop-web-outputs", Annotations: map[string]string{
			v1alpha1.SecretOutputsAnnotation: "token", v1alpha1.JSONOutputsAnnotation: "port,tags",
		}},
		Data: map[string][]byte{"color": []byte("blue"), "port": []byte("8080"), "tags": []byte(`["a","b"]`), "token": []byte("s3cr3t-t0ken")},
	})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.nsA, Name: "shop-web-outputs"},
		Data:       map[string]string{"color": "blue", "port": "8080", "tags": `["a","b"]`},
	})).To(Succeed())

	// Events, created newest first to show they are sorted; one of an
	// earlier Stack named web (another UID) and one of another Stack, both
	// left out.
	event := func(name string, uid types.UID, stackName, typ, reason, msg string, ago time.Duration, count int32) {
		if uid == "" {
			uid = f.web.UID
		}
		g.Expect(env.Client.Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.nsA, Name: name},
			InvolvedObject: corev1.ObjectReference{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.StackKind, Namespace: f.nsA, Name: stackName, UID: uid,
			},
			Type: typ, Reason: reason, Message: msg, Count: count,
			FirstTimestamp: at(ago + time.Minute), LastTimestamp: at(ago),
			Source: corev1.EventSource{Component: "stackpilot-controller"},
		})).To(Succeed())
	}
	event("shop-web.3", "", "shop-web", corev1.EventTypeNormal, "Succeeded", "up op-0003 at "+rev+": 1 created, 2 updated", 10*time.Hour, 1)
	event("shop-web.2", "", "shop-web", corev1.EventTypeWarning, v1alpha1.ProgramErrorReason, "up op-0002 failed: resource settings: configmaps \"app-settings\" is forbidden", 20*time.Hour, 3)
	event("shop-web.1", "", "shop-web", corev1.EventTypeNormal, "Succeeded", "up op-0001 at "+oldRev+": 3 created", 30*time.Hour, 1)
	event("shop-web.old", "00000000-0000-0000-0000-0000000000aa", "shop-web", corev1.EventTypeNormal, "Succeeded", "an earlier Stack named shop-web", 40*time.Hour, 1)
	event("shop-api.1", "", "shop-api", corev1.EventTypeNormal, "Succeeded", "another Stack", 15*time.Hour, 1)
	return f
}

// normalise replaces what must vary between runs: the namespaces' random
// part, times written as RFC 3339, the ages of the objects just created.
func (f *viewsFixture) normalise(s string) string {
	s = strings.ReplaceAll(s, f.nsA, "views-a-00000000")
	s = strings.ReplaceAll(s, f.nsB, "views-b-00000000")
	s = rfc3339.ReplaceAllString(s, "<TIME>")
	s = freshAge.ReplaceAllString(s, "${1}<AGE>${2}")
	return s
}

var (
	rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	// freshAge is the AGE of an object created seconds ago: the last column
	// of get stacks, or "(12s ago)".
	freshAge = regexp.MustCompile(`(?m)([\s(])\d{1,3}s(( ago\))?)$`)
)

// golden compares got with testdata/cli/name, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "cli", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the CLI's output (rerun with -update, then review the diff):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// TestCLIViews runs each view verb against the real API server and
// compares its table and JSON output with the golden files.
func TestCLIViews(t *testing.T) {
	t.Parallel()
	f := newViewsFixture(t)
	sel := "e2e.stackpilot.dev/views=" + f.label
	for _, tc := range []struct {
		golden string
		ns     string
		args   []string
	}{
		{"get-stacks.table", f.nsA, []string{"get", "stacks"}},
		{"get-stacks.json", f.nsA, []string{"get", "stacks", "-o", "json"}},
		{"get-stacks-all.table", f.nsA, []string{"get", "stacks", "-A", "-l", sel}},
		{"get-stacks-all.json", f.nsA, []string{"get", "stacks", "-A", "-l", sel, "-o", "json"}},
		{"get-stack-db.table", f.nsB, []string{"get", "stack", "shop-db"}},
		{"get-stack-db.yaml", f.nsB, []string{"get", "stack", "shop-db", "-o", "yaml"}},
		{"status-web.txt", f.nsA, []string{"status", "shop-web"}},
		{"status-web.json", f.nsA, []string{"status", "shop-web", "-o", "json"}},
		{"status-db.txt", f.nsB, []string{"describe", "shop-db"}},
		{"status-db.json", f.nsB, []string{"describe", "shop-db", "-o", "json"}},
		{"history-web.table", f.nsA, []string{"history", "shop-web"}},
		{"history-web.json", f.nsA, []string{"history", "shop-web", "-o", "json"}},
		{"history-db.table", f.nsB, []string{"history", "shop-db"}},
		{"events-web.table", f.nsA, []string{"events", "shop-web"}},
		{"events-web.json", f.nsA, []string{"events", "shop-web", "-o", "json"}},
		{"outputs-web.table", f.nsA, []string{"outputs", "shop-web"}},
		{"outputs-web.json", f.nsA, []string{"outputs", "shop-web", "-o", "json"}},
		{"outputs-web-secrets.table", f.nsA, []string{"outputs", "shop-web", "--show-secrets"}},
		{"outputs-web-secrets.json", f.nsA, []string{"outputs", "shop-web", "--show-secrets", "-o", "json"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, code := mustPlanCLI(t, tc.ns, tc.args...)
			if code != 0 {
				t.Fatalf("stackpilot %s: exit %d\n%s", strings.Join(tc.args, " "), code, errOut)
			}
			golden(t, tc.golden, f.normalise(out))
		})
	}

	t.Run("errors", func(t *testing.T) {
		g := NewWithT(t)
		_, errOut, code := mustPlanCLI(t, f.nsA, "status", "shop-db")
		g.Expect(code).To(Equal(1))
		g.Expect(f.normalise(errOut)).To(Equal("stackpilot: no Stack shop-db in namespace views-a-00000000; did you mean -n views-b-00000000?\n"))
		_, errOut, code = mustPlanCLI(t, f.nsA, "history", "shop-wbe")
		g.Expect(code).To(Equal(1))
		g.Expect(f.normalise(errOut)).To(Equal("stackpilot: no Stack shop-wbe in namespace views-a-00000000; did you mean shop-web?\n"))
		_, errOut, code = mustPlanCLI(t, f.nsA, "events", "shop-web", "-A")
		g.Expect(code).To(Equal(2), errOut)
		g.Expect(errOut).To(HavePrefix("stackpilot: -A/--all-namespaces lists Stacks; a named Stack is read in one namespace: use -n NAMESPACE\n"))
		_, errOut, code = mustPlanCLI(t, f.nsB, "outputs", "shop-db", "--show-secrets")
		g.Expect(code).To(Equal(1))
		g.Expect(f.normalise(errOut)).To(HavePrefix("stackpilot: the Stack views-b-00000000/shop-db publishes no outputs Secret (spec.outputs.secretName)"))
		out, errOut, code := mustPlanCLI(t, f.nsB, "get", "stacks", "-l", "app=none")
		g.Expect(code).To(Equal(0), errOut)
		g.Expect(out).To(BeEmpty())
		g.Expect(f.normalise(errOut)).To(Equal("No Stacks found in namespace views-b-00000000 matching \"app=none\".\n"))
	})

	t.Run("completion", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := mustPlanCLI(t, f.nsA, "__complete", "status", "sh")
		g.Expect(code).To(Equal(0), errOut)
		g.Expect(out).To(HavePrefix("shop-web\n:4\n"))
	})

	t.Run("outputs without the right to read the Secret", func(t *testing.T) {
		g := NewWithT(t)
		kubeconfig := impersonating(t, "jane", f.nsA, rbacv1.PolicyRule{
			APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"stacks"}, Verbs: []string{"get", "list"},
		}, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
		out, errOut, code := runViews(t, kubeconfig, f.nsA, "outputs", "shop-web")
		g.Expect(code).To(Equal(0), errOut)
		golden(t, "outputs-web.table", f.normalise(out))
		out, errOut, code = runViews(t, kubeconfig, f.nsA, "outputs", "shop-web", "--show-secrets")
		g.Expect(code).To(Equal(1))
		g.Expect(out).To(BeEmpty())
		g.Expect(f.normalise(errOut)).To(Equal("stackpilot: you may not read the outputs Secret shop-web-outputs in namespace views-a-00000000, so secret outputs cannot be shown: ask for get on secrets there, or run without --show-secrets to see the outputs that are not secret\n"))
		g.Expect(errOut).NotTo(ContainSubstring("s3cr3t"))
	})

	t.Run("watch", func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cliBinary(t), "--kubeconfig", env.Kubeconfig, "-n", f.nsA, "get", "stacks", "--watch")
		stdout, err := cmd.StdoutPipe()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cmd.Start()).To(Succeed())
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		lines := make(chan string, 10)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		next := func() string {
			select {
			case l, ok := <-lines:
				g.Expect(ok).To(BeTrue(), "the watch ended")
				return l
			case <-ctx.Done():
				t.Fatal("no line from get stacks --watch")
			}
			return ""
		}
		g.Expect(next()).To(HavePrefix("NAME       READY   STATUS"))
		g.Expect(next()).To(HavePrefix("shop-web   True    Applied revision main@sha1:6f1c2a9e5b7d3c8f0a4e"))
		// The rows of the first list are not printed again; a change is.
		time.Sleep(2 * time.Second)
		s := getStack(g, client.ObjectKeyFromObject(f.web))
		s.Status.Conditions[0].Status, s.Status.Conditions[0].Reason, s.Status.Conditions[0].Message = metav1.ConditionFalse, v1alpha1.ProgramErrorReason, "the program failed"
		g.Expect(env.Client.Status().Update(context.Background(), s)).To(Succeed())
		g.Expect(next()).To(MatchRegexp(`^shop-web   False   the program failed +main@sha1:6f1c2a9e5b7d +false +\d+s$`))
	})
}

// runViews runs the CLI with another kubeconfig.
func runViews(t *testing.T, kubeconfig, ns string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(cliBinary(t), append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// impersonating is a kubeconfig of the test's admin that acts as user
// (kubectl's --as), who may do only rules in ns.
func impersonating(t *testing.T, user, ns string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
