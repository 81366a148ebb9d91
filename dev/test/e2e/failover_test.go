package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/wire"
)

// leaseName is the controller's leader election Lease (cmd/controller).
const leaseName = "stackpilot-controller-leader"

// haPair is two replicas of the controller on one Lease, as two Pods of the
// Deployment would be: each its own process, data dir (engine logs, work
// directories, PULUMI_HOME) and endpoints; one backend that both reach. On
// one machine they share the host name, which the stack lock records.
type haPair struct {
	f        *fixture
	backend  string // the root of the shared file:// backend
	replicas [2]*controllerProcess
	dataDirs [2]string
}

func startHAPair(t *testing.T, f *fixture, args ...string) *haPair {
	t.Helper()
	p := &haPair{f: f, backend: t.TempDir()}
	for i := range p.replicas {
		p.dataDirs[i] = t.TempDir()
		p.replicas[i] = startController(t, f.ns, p.dataDirs[i], append([]string{
			"--leader-elect", "--leader-election-namespace=" + f.ns,
			"--default-backend=file://" + p.backend + "/{namespace}",
		}, args...)...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, r := range p.replicas {
				t.Logf("replica %d's log (last 40 lines):\n%s", i, testenv.TailFile(r.LogPath, 40))
			}
		}
	})
	return p
}

// isLeader reads the replica's leader_election_master_status (absent, 0,
// on a standby).
func isLeader(t *testing.T, c *controllerProcess) bool {
	t.Helper()
	n, err := c.Metric("leader_election_master_status", `name="`+leaseName+`"`)
	if err != nil {
		return false // a dead replica leads nothing
	}
	return n == 1
}

// leader waits until exactly one replica leads and returns its index.
func (p *haPair) leader(t *testing.T) int {
	t.Helper()
	leader := -1
	NewWithT(t).Eventually(func(g Gomega) {
		a, b := isLeader(t, p.replicas[0]), isLeader(t, p.replicas[1])
		g.Expect(a != b).To(BeTrue(), "exactly one leader (replica 0: %v, replica 1: %v)", a, b)
		leader = 1
		if a {
			leader = 0
		}
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	return leader
}

// holder is the Lease's holder identity now.
func (p *haPair) holder(g Gomega) string {
	var l coordinationv1.Lease
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: p.f.ns, Name: leaseName}, &l)).To(Succeed())
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// getLog GETs the last operation log of a Stack from one replica's logs
// endpoint, as a ServiceAccount that may get the Stack: the status, the
// operation the log is of, and the body.
func getLog(t *testing.T, c *controllerProcess, key client.ObjectKey) (int, string, string) {
	t.Helper()
	u := wire.LogsURL(&url.URL{Scheme: "https", Host: c.LogsAddr}, key.Namespace, key.Name, "", false)
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(wire.TokenHeader, stackReaderToken(t, key.Namespace))
	resp, err := insecureTLSClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(wire.OperationHeader), string(body)
}

// ups are the history's records of ups of revision rev.
func ups(s *v1alpha1.Stack, rev string) []v1alpha1.OperationRecord {
	var out []v1alpha1.OperationRecord
	for _, h := range s.Status.History {
		if h.Type == v1alpha1.OperationUp && strings.HasSuffix(h.Revision, rev) {
			out = append(out, h)
		}
	}
	return out
}

// TestFailoverMidUp (high availability): two replicas on one Lease; the
// leader's whole process tree is SIGKILLed while an up waits on a resource,
// as its container's death would be. The standby takes over the Lease,
// records the up interrupted once, proves the lock the dead up left dead
// (same host, its pulumi pid gone), clears it and runs the up once more,
// which succeeds: one interrupted and one successful up of the revision,
// no Locked failure, no lock left. The standby never reconciled while the
// leader lived. Receivers and the logs endpoint are served by every replica:
// the standby answers a push before and during the takeover, and its logs
// endpoint serves the re-run's log after. The takeover times are logged
// (docs/measurements.md), never asserted.
func TestFailoverMidUp(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	p := startHAPair(t, f)
	li := p.leader(t)
	leader, standby := p.replicas[li], p.replicas[1-li]
	f.ctrl = leader
	var before string
	g.Eventually(func(g Gomega) { before = p.holder(g); g.Expect(before).NotTo(BeEmpty()) }, time.Minute, 200*time.Millisecond).Should(Succeed())

	stack := f.stack("failover", func(s *v1alpha1.Stack) { s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	// A Receiver, served by both replicas: the same path on each.
	hook := createReceiver(t, f.ns, standby, "pushes", v1alpha1.GitHubReceiver)
	path := strings.TrimPrefix(hook, "http://"+standby.WebhookAddr)

	// The standby's logs endpoint answers too: it ran nothing, so it has no log.
	code, _, body := getLog(t, standby, key)
	g.Expect(code).To(Equal(http.StatusNotFound), body)
	g.Expect(body).To(ContainSubstring("has no operation log yet"))

	// The next revision's ConfigMap is ready only once it carries proceed=yes:
	// its up applies it, then waits, holding the stack lock. A push to the
	// standby's webhook starts it on the leader.
	gated := gatedProgram("gated")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": gated}, "gated")
	// (Ready may have been written by the leader before the standby indexed
	// the Receiver: until then the standby answers 404, and a push is sent again.)
	g.Eventually(func(g Gomega) {
		res := postGitHub(t, "http://"+standby.WebhookAddr+path, githubPush(f.repoURL, "main", next), webhookToken, "delivery-1")
		g.Expect(res.Code).To(Equal(http.StatusOK))
		g.Expect(res.Outcome).To(Equal("accepted"))
		g.Expect(res.Stacks).To(Equal(1))
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	var opID string
	g.Eventually(func(g Gomega) {
		op := getStack(g, key).Status.CurrentOperation
		g.Expect(op).NotTo(BeNil())
		g.Expect(op.Revision).To(HaveSuffix(next))
		opID = op.ID
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "gated"))
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	locks := func() []string { return lockFiles(t, p.backend) }
	g.Expect(locks()).To(HaveLen(1), "Pulumi holds the stack lock while it waits")
	g.Expect(standby.Operations(t, "")).To(Equal(0), "the standby ran nothing while the leader lived")

	// The leader's container dies: the controller, its runner, pulumi and the
	// plugins at once.
	killed := time.Now()
	leader.KillTree()
	g.Eventually(func() []string { return operationProcesses(p.dataDirs[li]) }, 10*time.Second, 100*time.Millisecond).
		Should(BeEmpty(), "nothing of the dead leader runs")
	g.Expect(locks()).To(HaveLen(1), "the dead up's lock is left in the backend")
	t.Logf("the leader's process tree was killed; the lock it left: %s", locks())
	// Let the re-run finish: the resource is ready from now on.
	labelAppSettings(t, f.ns, "proceed", "yes")

	// Through the takeover the survivor's webhook answers.
	// (Another body: a delivery is known by its body's digest, and one seen
	// already is answered "replayed".)
	res := postGitHub(t, "http://"+standby.WebhookAddr+path, append(githubPush(f.repoURL, "main", next), '\n'), webhookToken, "delivery-2")
	g.Expect(res.Code).To(Equal(http.StatusOK))
	g.Expect(res.Outcome).To(Equal("accepted"))

	var leaseTaken, recovered, rerunStarted time.Duration
	var rerun string
	g.Eventually(func(g Gomega) {
		now := time.Since(killed)
		if leaseTaken == 0 {
			if h := p.holder(g); h != before && h != "" && isLeader(t, standby) {
				leaseTaken = now
			}
		}
		s := getStack(g, key)
		for _, h := range s.Status.History {
			if h.ID == opID && h.Outcome == v1alpha1.OutcomeInterrupted && recovered == 0 {
				recovered = now
			}
		}
		if op := s.Status.CurrentOperation; op != nil && op.ID != opID && rerunStarted == 0 {
			rerunStarted, rerun = now, op.ID
		}
		g.Expect(leaseTaken).NotTo(BeZero(), "the standby leads")
		g.Expect(recovered).NotTo(BeZero(), "the interrupted up is recorded")
		g.Expect(rerunStarted).NotTo(BeZero(), "the up runs again")
	}, 4*time.Minute, 100*time.Millisecond).Should(Succeed())
	t.Logf("after SIGKILL of the leader's tree: the standby leads after %s, records the up interrupted after %s, runs it again after %s (operation %s)",
		leaseTaken.Round(10*time.Millisecond), recovered.Round(10*time.Millisecond), rerunStarted.Round(10*time.Millisecond), rerun)

	s := waitApplied(t, key, next)
	g.Expect(s.Status.CurrentOperation).To(BeNil())
	g.Expect(s.Status.History[0].ID).To(Equal(rerun))
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded), "history: %+v", s.Status.History)
	revUps := ups(s, next)
	g.Expect(revUps).To(HaveLen(2), "one interrupted up and its one re-run; history: %+v", s.Status.History)
	g.Expect(revUps[1].ID).To(Equal(opID))
	g.Expect(revUps[1].Outcome).To(Equal(v1alpha1.OutcomeInterrupted))
	g.Expect(revUps[1].Reason).To(Equal(v1alpha1.InterruptedReason))
	for _, h := range s.Status.History {
		g.Expect(h.Reason).NotTo(Equal(v1alpha1.LockedReason), "no operation found the stack locked; history: %+v", s.Status.History)
	}
	g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(next))
	g.Expect(standby.Operations(t, "up")).To(Equal(1), "the survivor ran the up once")
	g.Expect(locks()).To(BeEmpty(), "no lock is left")
	g.Expect(s.Status.History[0].Message).To(ContainSubstring("removed 1 stale lock(s) of the interrupted operation"),
		"the re-run proved the dead up's lock dead and removed it")

	// The survivor's logs endpoint serves the re-run's log, and its webhook a push.
	code, of, body := getLog(t, standby, key)
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(of).To(Equal(rerun))
	g.Expect(body).To(ContainSubstring("Updating (failover)"))
	res = postGitHub(t, "http://"+standby.WebhookAddr+path, append(githubPush(f.repoURL, "main", next), ' ', '\n'), webhookToken, "delivery-3")
	g.Expect(res.Outcome).To(Equal("accepted"))
	g.Expect(runner.ProcessAlive(standby.Pid())).To(BeTrue())
}

// TestHandoverOnSIGTERM (high availability): the leader is stopped
// gracefully (a rollout, a drain) while an up waits. It cancels the up as
// a single controller does on SIGTERM (Pulumi gets SIGINT, writes its
// checkpoint, releases the lock; recorded cancelled, or succeeded if it
// finished first), releases the Lease as it exits, and the standby takes
// over at once and applies the revision: nothing interrupted, no lock to
// clear.
func TestHandoverOnSIGTERM(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const grace = 30 * time.Second
	f := newFixture(t)
	p := startHAPair(t, f, "--graceful-shutdown-timeout="+grace.String())
	li := p.leader(t)
	leader, standby := p.replicas[li], p.replicas[1-li]
	f.ctrl = leader

	stack := f.stack("handover", func(s *v1alpha1.Stack) { s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	gated := gatedProgram("gated")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": gated}, "gated")
	requestReconcile(t, key)
	var opID string
	g.Eventually(func(g Gomega) {
		op := getStack(g, key).Status.CurrentOperation
		g.Expect(op).NotTo(BeNil())
		g.Expect(op.Revision).To(HaveSuffix(next))
		opID = op.ID
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "gated"))
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	locks := func() []string { return lockFiles(t, p.backend) }
	g.Expect(locks()).To(HaveLen(1), "Pulumi holds the stack lock while it waits")

	stopped := time.Now()
	g.Expect(syscall.Kill(leader.Pid(), syscall.SIGTERM)).To(Succeed())
	var handedOver time.Duration
	g.Eventually(func() bool {
		if isLeader(t, standby) {
			handedOver = time.Since(stopped)
			return true
		}
		return false
	}, grace+time.Minute, 100*time.Millisecond).Should(BeTrue(), "the standby leads")
	g.Eventually(leader.Exited(), grace+20*time.Second).Should(BeClosed(), "the old leader exits within its graceful timeout")
	t.Logf("after SIGTERM of the leader: the standby leads after %s; the old leader exited after %s",
		handedOver.Round(10*time.Millisecond), time.Since(stopped).Round(10*time.Millisecond))

	// The gate opens; the new leader applies the revision on the state the
	// cancelled up left, without a lock to clear.
	labelAppSettings(t, f.ns, "proceed", "yes")
	s := waitApplied(t, key, next)
	var first *v1alpha1.OperationRecord
	for i, h := range s.Status.History {
		g.Expect(h.Outcome).NotTo(Equal(v1alpha1.OutcomeInterrupted), "history: %+v", s.Status.History)
		g.Expect(h.Reason).NotTo(Equal(v1alpha1.LockedReason), "history: %+v", s.Status.History)
		if h.ID == opID {
			first = &s.Status.History[i]
		}
	}
	g.Expect(first).NotTo(BeNil(), "the cut up is in the history: %+v", s.Status.History)
	g.Expect(first.Outcome).To(BeElementOf(v1alpha1.OperationOutcome(runner.OutcomeCancelled), v1alpha1.OutcomeSucceeded),
		"the old leader recorded the end of its up; history: %+v", s.Status.History)
	t.Logf("the old leader's up ended %s: %s", first.Outcome, first.Message)
	wantUps := 1
	if first.Outcome == v1alpha1.OutcomeSucceeded {
		wantUps = 0 // it finished before the cancel reached it: nothing to run again
	}
	g.Expect(standby.Operations(t, "up")).To(Equal(wantUps), fmt.Sprintf("history: %+v", s.Status.History))
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(locks()).To(BeEmpty(), "no lock is left")
	g.Eventually(func() []string { return operationProcesses(p.dataDirs[li]) }, 10*time.Second, 100*time.Millisecond).Should(BeEmpty())
}
