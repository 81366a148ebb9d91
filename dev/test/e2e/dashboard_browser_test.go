package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/browser"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// browserWait bounds what a page waits for the controller to do (an up,
// a reconcile): a loaded machine runs Pulumi slowly.
const browserWait = 5 * time.Minute

// What a test waits for in the page: signed in (the navigation and the
// user shown), and the fleet's table answered (its pager counts Stacks).
const (
	signedIn    = `!document.getElementById("nav").hidden && document.getElementById("user").textContent != ""`
	fleetLoaded = `/\d+ Stacks/.test(document.getElementById("pageinfo").textContent)`
)

// signInBrowser opens the dashboard in p signed in as the holder of token,
// the way `stackpilot dashboard` does: a sign-in code, made for the token,
// in the address's fragment (the token itself never is in a URL).
func signInBrowser(t *testing.T, p *browser.Page, ctrl *controllerProcess, token string) {
	t.Helper()
	code, out, _ := dashboardDo(t, ctrl, "POST", "/api/signin-codes", nil, "Authorization", "Bearer "+token)
	if code != 200 {
		t.Fatalf("a sign-in code: %d %v", code, out)
	}
	p.Open("https://" + ctrl.DashboardAddr + "/#code=" + out["code"].(string))
	p.WaitFor("signed in", signedIn, time.Minute)
}

// dashboardCLI runs `stackpilot dashboard` as a user does, serving the
// dashboard on loopback port (0: any free one) straight to the
// controller's listener (--controller-url: the e2e controller runs as a
// process, not in a Pod to port-forward to), and returns the link it
// prints, which signs a browser in as token's holder, and a func that
// kills it (also run when the test ends).
func dashboardCLI(t *testing.T, ctrl *controllerProcess, token string, port int) (link string, kill func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, cliBinary(t), "dashboard", "--controller-url", "https://"+ctrl.DashboardAddr,
		"--insecure-skip-tls-verify", "--token", token, "--port", strconv.Itoa(port))
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill = sync.OnceFunc(func() { cancel(); _ = cmd.Wait() })
	t.Cleanup(kill)
	t.Cleanup(func() { // runs first: what the proxy said of the requests it could not pass
		if out := stderr.String(); t.Failed() && out != "" {
			t.Logf("stackpilot dashboard (port %d) wrote:\n%s", port, out)
		}
	})
	links := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "#code=") {
				links <- strings.TrimSpace(sc.Text())
			}
		}
	}()
	select {
	case link = <-links:
	case <-time.After(3 * time.Minute):
		kill()
		t.Fatalf("stackpilot dashboard printed no link in 3 minutes; stderr:\n%s", stderr.String())
	}
	if !strings.HasPrefix(link, "http://localhost:") || strings.Contains(link, token) {
		t.Fatalf("stackpilot dashboard printed %q: want http://localhost:PORT/#code=..., never the token", link)
	}
	return link, kill
}

// signInThroughCLI opens the dashboard in p through `stackpilot
// dashboard`'s proxy (plain HTTP on localhost), signed in with the link it
// printed, and returns the proxy's port and a func that kills it.
func signInThroughCLI(t *testing.T, p *browser.Page, ctrl *controllerProcess, token string) (port int, kill func()) {
	t.Helper()
	link, kill := dashboardCLI(t, ctrl, token, 0)
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	if port, err = strconv.Atoi(u.Port()); err != nil {
		t.Fatalf("the link %q names no port", link)
	}
	p.Open(link)
	p.WaitFor("signed in", signedIn, time.Minute)
	return port, kill
}

// fleetCounts reads the fleet page's counts by state and its total.
func fleetCounts(p *browser.Page) map[string]int {
	return browser.Eval[map[string]int](p, `(() => {
		const out = {};
		for (const b of document.querySelectorAll("#counts .count")) out[b.dataset.state] = Number(b.querySelector("strong").textContent);
		const m = document.getElementById("pageinfo").textContent.match(/(\d+) Stacks/);
		out.total = m ? Number(m[1]) : -1;
		return out;
	})()`)
}

// kubectlCounts counts the Stacks of ns by state from what `kubectl get
// stacks` prints, by the rules the fleet page states (docs/guide/dashboard.md):
// Ready is the Ready condition True; Failing is it False on a Stack neither
// suspended nor waiting for approval; PlanPending is the PlanPending
// condition True; Suspended is spec.suspend.
func kubectlCounts(t *testing.T, ns string) map[string]int {
	t.Helper()
	out, err := exec.Command(filepath.Join(env.BinDir, "kubectl"), "--kubeconfig", env.Kubeconfig, "get", "stacks", "-n", ns, "--no-headers",
		"-o", `custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,PENDING:.status.conditions[?(@.type=="PlanPending")].status,SUSPEND:.spec.suspend`).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get stacks: %v: %s", err, out)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("kubectl get stacks printed %q", line)
		}
		ready, pending, suspended := f[1], f[2] == "True", f[3] == "true"
		counts["total"]++
		switch {
		case ready == "True":
			counts["Ready"]++
		case ready == "False" && !suspended && !pending:
			counts["Failing"]++
		}
		if pending {
			counts["PlanPending"]++
		}
		if suspended {
			counts["Suspended"]++
		}
	}
	return counts
}

// TestDashboardInBrowser drives the dashboard in a real headless Chromium
// against the controller and real Stacks:
//   - the fleet's counts are what `kubectl get stacks` says;
//   - approving in the plan page, opened with `stackpilot dashboard`,
//     applies exactly the plan the page showed, as dashboard:<user>;
//   - the Stack's page follows that up while it runs (its engine log
//     streamed) to its end, without a reload;
//   - a user who may read one namespace sees only its Stacks, and is
//     refused another's;
//   - the graph draws the edges of a three-Stack chain;
//   - a lost connection is said, and the page reconnects by itself;
//   - no page's document holds a value of the test's Secrets, or a token;
//   - every page is screenshotted (tmp/artifacts/browser), and none is
//     blank, and no page threw.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newApprovalFixture(t)
	other := env.Namespace(t)
	// The bridge program too, for a Stack with a secret output (a commit
	// holds the files it names, no others).
	f.commit = f.git.Commit(t, "infra", "main", map[string]string{
		"app/Pulumi.yaml": approvalProgram("blue", f.source), "bridge/Pulumi.yaml": bridgeProgram(""),
	}, "bridge")
	const secretToken = "s3cr3t-browser-t0ken-value"
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": secretToken})
	createSecret(t, f.ns, "hook-token", map[string]string{"token": "hook-s3cret-never-shown"})
	f.start(t, "--watch-namespace="+f.ns+","+other)
	logOnFailure(t, f.fixture)
	b := browser.Start(t)

	manual := f.approvalStack("manual", v1alpha1.ApprovalManual)
	secretive := f.stack("secretive", func(s *v1alpha1.Stack) {
		s.Spec.Source.Dir = "bridge"
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
	})
	// A chain: mid waits for manual, top reads mid's outputs.
	mid := f.stack("mid", func(s *v1alpha1.Stack) {
		s.Spec.Suspend = true
		s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "manual"}}
	})
	top := f.stack("top", func(s *v1alpha1.Stack) {
		s.Spec.Suspend = true
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{Name: "mid"}}}
	})
	theirs := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "theirs"}, Spec: *mid.Spec.DeepCopy()}
	theirs.Spec.DependsOn = nil
	for _, s := range []*v1alpha1.Stack{manual, secretive, mid, top, theirs} {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	g.Expect(env.Client.Create(ctx, &v1alpha1.Receiver{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "hook"},
		Spec: v1alpha1.ReceiverSpec{Type: v1alpha1.GenericHMACReceiver, SecretRef: v1alpha1.LocalObjectReference{Name: "hook-token"}}})).To(Succeed())

	approverToken := dashboardApprover(t, f.ns)
	readerToken := stackReaderToken(t, f.ns)

	planned := waitPlan(t, client.ObjectKeyFromObject(manual), f.commit, "", v1alpha1.AwaitingApprovalReason)
	waitApplied(t, client.ObjectKeyFromObject(secretive), f.commit)

	// No page may hold a Secret's value, or a caller's token. A Stack's
	// outputs Secret holds every output: only those it says are secret
	// are (the others are shown, as the outputs ConfigMap shows them).
	var secrets corev1.SecretList
	g.Expect(env.Client.List(ctx, &secrets, client.InNamespace(f.ns))).To(Succeed())
	forbidden := []string{approverToken, readerToken}
	for _, s := range secrets.Items {
		secretKeys, outputs := s.Annotations[v1alpha1.SecretOutputsAnnotation]
		for k, v := range s.Data {
			if len(v) >= 8 && (!outputs || slices.Contains(strings.Split(secretKeys, ","), k)) {
				forbidden = append(forbidden, string(v))
			}
		}
	}
	g.Expect(forbidden).To(ContainElements(secretToken, passphrase))
	scan := func(p *browser.Page, page string) {
		t.Helper()
		html := p.HTML()
		for _, v := range forbidden {
			if strings.Contains(html, v) {
				t.Errorf("the %s page holds a secret value (%d bytes)", page, len(v))
			}
		}
	}

	// The approver: the fleet, as kubectl counts it.
	// The approver goes through `stackpilot dashboard`'s proxy: its
	// changes (check now, approve) cross it to the controller.
	a := b.User(t, "approver")
	cliPort, killCLI := signInThroughCLI(t, a, f.ctrl, approverToken)
	a.WaitFor("the fleet", fleetLoaded, time.Minute)
	g.Eventually(func(g Gomega) {
		want := kubectlCounts(t, f.ns)
		a.Go("#/?refresh=" + fmt.Sprint(time.Now().UnixNano()))
		a.WaitFor("the fleet", fleetLoaded, time.Minute)
		got := fleetCounts(a)
		for _, k := range []string{"total", "Ready", "Failing", "PlanPending", "Suspended"} {
			g.Expect(got[k]).To(Equal(want[k]), "%s: the page %v, kubectl %v", k, got, want)
		}
		g.Expect(want["total"]).To(Equal(4))
	}, time.Minute, time.Second).Should(Succeed())
	a.Screenshot("fleet")
	scan(a, "fleet")

	// The graph: the chain's two edges, each drawn.
	a.Go("#/graph")
	a.WaitFor("the graph", `document.querySelectorAll("#g-canvas path.edge").length >= 2`, time.Minute)
	edges := browser.Eval[[]string](a, `[...document.querySelectorAll("#g-canvas path.edge")].map(e => e.dataset.from + ">" + e.dataset.to + ":" + e.dataset.kind)`)
	g.Expect(edges).To(ConsistOf(f.ns+"/mid>"+f.ns+"/manual:dependsOn", f.ns+"/top>"+f.ns+"/mid:stackOutputs"))
	g.Expect(browser.Eval[int](a, `document.querySelectorAll("#g-canvas g.node").length`)).To(Equal(3))
	a.Screenshot("graph")
	scan(a, "graph")

	// The blast radius of the pending commit, the Receivers and Alerts.
	a.Go("#/blast")
	a.WaitFor("the blast radius", `document.getElementById("b-body").textContent.includes("manual")`, time.Minute)
	a.Screenshot("blast")
	scan(a, "blast")
	a.Go("#/objects")
	a.WaitFor("the Receivers", `document.getElementById("o-receivers").textContent.includes("hook")`, time.Minute)
	a.Screenshot("objects")
	scan(a, "objects")

	// The Stack with a secret output: shown, masked.
	a.Go("#/stacks/" + f.ns + "/secretive")
	a.WaitFor("the outputs", `document.getElementById("s-outputs").textContent.includes("token")`, time.Minute)
	a.WaitFor("the engine log", `document.getElementById("s-log").textContent.length > 0`, time.Minute)
	a.Screenshot("stack")
	scan(a, "stack")

	// Drift: check now.
	a.Go("#/stacks/" + f.ns + "/secretive/drift")
	a.WaitFor("the drift page", `document.getElementById("d-title").textContent.includes("secretive")`, time.Minute)
	a.Must("check now", chromedp.Click(chromedp.ID("d-check")))
	a.WaitFor("drift check requested", `document.getElementById("d-result").textContent != ""`, time.Minute)
	g.Expect(a.Text("#d-result")).NotTo(Or(ContainSubstring("refused"), ContainSubstring("may not")), "the page's answer")
	g.Eventually(func(g Gomega) {
		s := getStack(g, client.ObjectKeyFromObject(secretive))
		g.Expect(s.Annotations[v1alpha1.ReconcileRequestAnnotation]).To(HavePrefix(v1alpha1.DriftCheckRequestPrefix))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	a.Screenshot("drift")
	scan(a, "drift")

	// The plan page shows the pending plan; its Approve button carries its id.
	a.Go("#/stacks/" + f.ns + "/manual/plan")
	a.WaitFor("the Approve button", `!document.getElementById("p-approve").hidden`, time.Minute)
	shown := browser.Eval[string](a, `document.getElementById("p-approve").dataset.plan`)
	g.Expect(shown).To(Equal(planned.Status.PendingPlan.ID))
	g.Expect(a.Text("#p-body")).To(ContainSubstring("kubernetes:core/v1:ConfigMap"))
	a.Screenshot("plan")
	scan(a, "plan")

	// The up it approves blocks reading the program's source (a FIFO)
	// until the page has been seen following it: the page must show it
	// running, not only after the fact.
	g.Expect(os.Remove(f.source)).To(Succeed())
	g.Expect(syscall.Mkfifo(f.source, 0o644)).To(Succeed())
	feed := make(chan struct{}, 1)
	feedCtx, stopFeeding := context.WithCancel(ctx)
	go feedFIFO(feedCtx, t, f.source, "v1", feed)
	t.Cleanup(func() {
		stopFeeding()
		// A feeder waiting for a reader that will not come: be one.
		if r, err := os.OpenFile(f.source, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = r.Close()
		}
	})

	a.Must("approve", chromedp.Click(chromedp.ID("p-approve")))
	a.WaitFor("approved", `document.getElementById("p-result").textContent != ""`, time.Minute)
	g.Expect(a.Text("#p-result")).NotTo(ContainSubstring("refused"))
	a.Go("#/stacks/" + f.ns + "/manual")
	browser.Eval[bool](a, `(() => { window.stackpilotTestMark = "no reload"; return true; })()`)
	a.WaitFor("the running up", `!document.getElementById("s-current").hidden && document.getElementById("s-log-title").textContent.includes("(following)")`, browserWait)
	a.Screenshot("stack-running")
	feed <- struct{}{} // the program may read its source now
	a.WaitFor("the up's end", `document.getElementById("s-current").hidden && !document.getElementById("s-log-title").textContent.includes("(following)")
		&& document.querySelector("#s-history li") && document.querySelector("#s-history li").textContent.includes("up")`, browserWait)
	g.Expect(browser.Eval[string](a, `window.stackpilotTestMark`)).To(Equal("no reload"), "the page was reloaded")
	g.Expect(a.Text("#s-log")).To(ContainSubstring("kubernetes:core/v1:ConfigMap"), "the followed log")
	g.Eventually(func(g Gomega) {
		s := getStack(g, client.ObjectKeyFromObject(manual))
		ups := records(s, v1alpha1.OperationUp)
		g.Expect(ups).NotTo(BeEmpty())
		g.Expect(ups[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded), "%+v", ups[0])
		g.Expect(ups[0].Plan).To(Equal(shown), "the up applied the plan the page showed")
		g.Expect(ups[0].ApprovedBy).To(Equal("dashboard:system:serviceaccount:" + f.ns + ":approver"))
	}, time.Minute, time.Second).Should(Succeed())
	a.Screenshot("stack-done")
	scan(a, "stack")

	// The reader of one namespace: its Stacks only, another's refused.
	r := b.User(t, "reader")
	signInBrowser(t, r, f.ctrl, readerToken)
	r.WaitFor("the fleet", fleetLoaded, time.Minute)
	namespaces := browser.Eval[[]string](r, `[...document.querySelectorAll("#stacks tbody tr td:first-child")].map(td => td.textContent)`)
	g.Expect(namespaces).To(HaveLen(4))
	g.Expect(namespaces).To(HaveEach(f.ns))
	r.Screenshot("fleet")
	scan(r, "fleet")
	r.Go("#/stacks/" + other + "/theirs")
	r.WaitFor("refused", `document.getElementById("s-error").textContent != ""`, time.Minute)
	g.Expect(r.Text("#s-error")).To(ContainSubstring("may not get"))
	g.Expect(browser.Eval[bool](r, `document.getElementById("s-body").hidden`)).To(BeTrue())
	r.Screenshot("refused")
	scan(r, "refused")

	// A lost connection (the CLI's proxy gone) is said, and the page
	// reconnects by itself once it is back on the same port; changes
	// reach it again.
	a.Go("#/")
	a.WaitFor("the fleet", `/4 Stacks/.test(document.getElementById("pageinfo").textContent)`, time.Minute)
	killCLI()
	a.WaitFor("connection lost", `document.getElementById("live").className == "live lost" && document.getElementById("live").textContent.includes("reconnecting")`, time.Minute)
	a.Screenshot("connection-lost")
	// A Stack created while the page cannot hear of it: back, the page
	// reads everything again.
	late := f.stack("late", func(s *v1alpha1.Stack) { s.Spec.Suspend = true })
	g.Expect(env.Client.Create(ctx, late)).To(Succeed())
	g.Eventually(func() int {
		code, fleet, _ := dashboardDo(t, f.ctrl, "GET", "/api/fleet?namespace="+f.ns, nil, "Authorization", "Bearer "+approverToken)
		if code != 200 {
			return -1
		}
		return int(fleet["total"].(float64))
	}, time.Minute, 200*time.Millisecond).Should(Equal(5), "the controller's cache holds the new Stack")
	dashboardCLI(t, f.ctrl, approverToken, cliPort)
	a.WaitFor("live again", `document.getElementById("live").className == "live live"`, 2*time.Minute)
	a.WaitFor("the new Stack, without a reload", `/5 Stacks/.test(document.getElementById("pageinfo").textContent)`, time.Minute)
	g.Expect(browser.Eval[string](a, `window.stackpilotTestMark`)).To(Equal("no reload"), "the page was reloaded")

	g.Expect(a.Problems()).To(BeEmpty(), "the approver's pages threw")
	g.Expect(r.Problems()).To(BeEmpty(), "the reader's pages threw")
}

// feedFIFO, once start is signalled, writes content to the first reader of
// the FIFO at path, and puts a regular file with content in its place for
// any later reader.
func feedFIFO(ctx context.Context, t *testing.T, path, content string, start <-chan struct{}) {
	select {
	case <-start:
	case <-ctx.Done():
		return
	}
	// Opening for writing blocks until a reader opens it.
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Logf("feeding %s: %v", path, err)
		return
	}
	defer w.Close()
	if _, err := w.WriteString(content); err != nil {
		t.Logf("feeding %s: %v", path, err)
	}
	// Before the reader sees the end (when w closes): a second reader
	// opens the file, not the FIFO.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Logf("feeding %s: %v", path, err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Logf("feeding %s: %v", path, err)
	}
}
