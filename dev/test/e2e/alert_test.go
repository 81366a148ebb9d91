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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/notify"
)

// newAlert makes an Alert of provider type typ in ns.
func newAlert(ns, name string, typ v1alpha1.ProviderType, address, secret string, mutate ...func(*v1alpha1.Alert)) *v1alpha1.Alert {
	a := &v1alpha1.Alert{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.AlertSpec{Provider: v1alpha1.AlertProvider{Type: typ, Address: address}},
	}
	if secret != "" {
		a.Spec.Provider.SecretRef = &v1alpha1.LocalObjectReference{Name: secret}
	}
	for _, m := range mutate {
		m(a)
	}
	return a
}

// eventsOf decodes the "event" of each generic payload.
func eventsOf(t *testing.T, reqs []sinkRequest) []string {
	t.Helper()
	var out []string
	for _, r := range reqs {
		var ev notify.Event
		if err := json.Unmarshal(r.Body, &ev); err != nil {
			t.Fatalf("payload is not an event: %v: %s", err, r.Body)
		}
		out = append(out, string(ev.Type))
	}
	return out
}

// TestAlertTransitions: a Stack that applies, fails (and fails again on its
// retries) and recovers sends one message per change of state to each
// Alert: applied, failed, recovered to a generic-hmac sink (signed), a
// trigger and a resolve with one dedup key to PagerDuty, and three commit
// statuses to GitHub; no payload carries a secret value.
func TestAlertTransitions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const (
		appSecret  = "alert-app-s3cret-7f1d"
		hmacKey    = "alert-hmac-k3y-2b9e"
		hookPath   = "/hook/alert-path-s3cret-88aa"
		pdKey      = "alert-pd-r0uting-k3y-5c3a"
		githubTok  = "alert-gh-t0ken-e41f"
		repository = "acme/infra"
	)
	f := newFixture(t)
	f.repoURL = f.git.URL(repository)
	first := f.git.Commit(t, repository, "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("")}, "first")
	generic, pd, gh := newAlertSink(t, false), newAlertSink(t, false), newAlertSink(t, false)
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": appSecret})
	createSecret(t, f.ns, "hmac", map[string]string{"address": generic.URL() + hookPath, "token": hmacKey})
	createSecret(t, f.ns, "pagerduty", map[string]string{"token": pdKey})
	createSecret(t, f.ns, "github", map[string]string{"token": githubTok})
	f.start(t)
	logOnFailure(t, f)
	for _, a := range []*v1alpha1.Alert{
		newAlert(f.ns, "hmac", v1alpha1.ProviderGenericHMAC, "", "hmac"),
		newAlert(f.ns, "pagerduty", v1alpha1.ProviderPagerDuty, pd.URL()+"/v2/enqueue", "pagerduty"),
		newAlert(f.ns, "github", v1alpha1.ProviderGitHub, gh.URL()+"/api/v3", "github", func(a *v1alpha1.Alert) {
			a.Spec.Stacks.Names = []string{"noisy"}
		}),
		// Selects nothing: another Stack's name, and a label no Stack has.
		newAlert(f.ns, "other", v1alpha1.ProviderGeneric, generic.URL()+"/other", "", func(a *v1alpha1.Alert) {
			a.Spec.Stacks.Names = []string{"someone-else"}
			a.Spec.Stacks.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "nobody"}}
		}),
		// Its Secret does not exist: Ready=False, and nothing is sent.
		newAlert(f.ns, "no-secret", v1alpha1.ProviderGenericHMAC, generic.URL()+"/no-secret", "missing"),
	} {
		g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		var a, missing v1alpha1.Alert
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hmac"}, &a)).To(Succeed())
		g.Expect(conditions.IsReady(&a)).To(BeTrue())
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "no-secret"}, &missing)).To(Succeed())
		g.Expect(conditions.IsFalse(&missing, v1alpha1.ReadyCondition)).To(BeTrue())
		g.Expect(conditions.GetReason(&missing, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.InputsNotFoundReason))
		g.Expect(conditions.GetMessage(&missing, v1alpha1.ReadyCondition)).To(ContainSubstring("Secret " + f.ns + "/missing"))
	}, time.Minute, 500*time.Millisecond).Should(Succeed())

	stack := f.stack("noisy", func(s *v1alpha1.Stack) {
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, first)
	g.Eventually(func() []string { return eventsOf(t, generic.Requests()) }, 30*time.Second, 200*time.Millisecond).
		Should(Equal([]string{"applied"}))

	broken := f.git.Commit(t, repository, "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        broken: ${doesNotExist}")}, "broken")
	requestReconcile(t, key)
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.Failures).To(BeNumerically(">=", 3), "failed and retried: %s", readyMessage(s))
		g.Expect(s.Status.CurrentOperation).To(BeNil())
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(eventsOf(t, generic.Requests())).To(Equal([]string{"applied", "failed"}), "retries of one failure send nothing")

	// A restart, the Stack still failing: the new controller starts from the
	// Stack's state and sends nothing for it.
	g.Expect(f.ctrl.Stop()).To(Succeed())
	firstLogs := f.ctrl.Logs(t)
	failures := getStack(g, key).Status.Failures
	f.start(t)
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.Failures).To(BeNumerically(">", failures), "the new controller retried: %s", readyMessage(s))
		g.Expect(s.Status.CurrentOperation).To(BeNil())
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(eventsOf(t, generic.Requests())).To(Equal([]string{"applied", "failed"}), "no burst on restart")

	fixed := f.git.Commit(t, repository, "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: fixed")}, "fix")
	requestReconcile(t, key)
	waitApplied(t, key, fixed)
	g.Eventually(func() []string { return eventsOf(t, generic.Requests()) }, 30*time.Second, 200*time.Millisecond).
		Should(Equal([]string{"applied", "failed", "recovered"}))
	time.Sleep(5 * time.Second) // nothing more comes
	g.Expect(eventsOf(t, generic.Requests())).To(Equal([]string{"applied", "failed", "recovered"}))

	// generic-hmac: the Secret's address, signed like our Receiver checks.
	reqs := generic.Requests()
	for _, r := range reqs {
		g.Expect(r.Path).To(Equal(hookPath))
		g.Expect(r.Header.Get("X-Signature")).To(Equal(notify.Sign(hmacKey, r.Body)))
	}
	var failed notify.Event
	g.Expect(json.Unmarshal(reqs[1].Body, &failed)).To(Succeed())
	g.Expect(failed.Namespace + "/" + failed.Name).To(Equal(f.ns + "/noisy"))
	g.Expect(failed.Revision).To(HaveSuffix(broken))
	g.Expect(failed.Reason).To(Equal(v1alpha1.ProgramErrorReason))
	g.Expect(failed.Message).To(ContainSubstring("doesNotExist"), "the error's first line")
	g.Expect(failed.Message).NotTo(ContainSubstring("\n"))
	var recovered notify.Event
	g.Expect(json.Unmarshal(reqs[2].Body, &recovered)).To(Succeed())
	g.Expect(recovered.Revision).To(HaveSuffix(fixed))
	g.Expect(recovered.Changes).NotTo(BeNil())
	g.Expect(recovered.Changes.Update).To(BeNumerically(">=", 1), "the change counts")

	// PagerDuty: a trigger and a resolve, one dedup key; applies are no incident.
	pdReqs := pd.Requests()
	g.Expect(pdReqs).To(HaveLen(2))
	var trigger, resolve map[string]any
	g.Expect(json.Unmarshal(pdReqs[0].Body, &trigger)).To(Succeed())
	g.Expect(json.Unmarshal(pdReqs[1].Body, &resolve)).To(Succeed())
	g.Expect(pdReqs[0].Path).To(Equal("/v2/enqueue"))
	g.Expect(trigger).To(HaveKeyWithValue("routing_key", pdKey))
	g.Expect(trigger).To(HaveKeyWithValue("event_action", "trigger"))
	g.Expect(trigger).To(HaveKeyWithValue("dedup_key", "stackpilot/"+f.ns+"/noisy"))
	g.Expect(trigger).To(HaveKey("payload"))
	payload := trigger["payload"].(map[string]any)
	g.Expect(payload).To(HaveKeyWithValue("severity", "error"))
	g.Expect(payload).To(HaveKeyWithValue("source", f.ns+"/noisy"))
	g.Expect(payload["summary"]).To(ContainSubstring("failed"))
	g.Expect(payload).To(HaveKey("custom_details"))
	g.Expect(resolve).To(Equal(map[string]any{"routing_key": pdKey, "event_action": "resolve", "dedup_key": "stackpilot/" + f.ns + "/noisy"}))

	// GitHub: a commit status per state, on the commit it is about.
	ghReqs := gh.Requests()
	g.Expect(ghReqs).To(HaveLen(3))
	wantGH := []struct{ sha, state string }{{first, "success"}, {broken, "failure"}, {fixed, "success"}}
	for i, r := range ghReqs {
		g.Expect(r.Path).To(Equal("/api/v3/repos/acme/infra/statuses/" + wantGH[i].sha))
		g.Expect(r.Header.Get("Authorization")).To(Equal("Bearer " + githubTok))
		var st map[string]string
		g.Expect(json.Unmarshal(r.Body, &st)).To(Succeed())
		g.Expect(st).To(HaveKeyWithValue("state", wantGH[i].state))
		g.Expect(st).To(HaveKeyWithValue("context", "stackpilot/"+f.ns+"/noisy"))
	}

	// No secret in any payload (a provider's own credential only where it belongs).
	all := map[string][]sinkRequest{"generic": reqs, "pagerduty": pdReqs, "github": ghReqs}
	secrets := []string{appSecret, passphrase, hmacKey, hookPath, pdKey, githubTok}
	for name, rs := range all {
		for _, r := range rs {
			for _, s := range secrets {
				if (name == "pagerduty" && s == pdKey) || (name == "generic" && s == hookPath) {
					continue
				}
				g.Expect(string(r.Body)).NotTo(ContainSubstring(s), "%s payload %s", name, r.Body)
			}
		}
	}
	assertNoSecrets(t, f, key, secrets...)
	for _, secret := range secrets {
		g.Expect(firstLogs).NotTo(ContainSubstring(secret), "the first controller's log")
	}

	// Status and metrics: the running controller's, the one restarted before
	// the recovery (counts live in memory).
	var a v1alpha1.Alert
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hmac"}, &a)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hmac"}, &a)).To(Succeed())
		g.Expect(a.Status.Sent).To(BeEquivalentTo(1))
		g.Expect(a.Status.LastSent).NotTo(BeNil())
	}, 30*time.Second, time.Second).Should(Succeed())
	g.Expect(a.Status.Failures).To(BeZero())
	for provider, want := range map[string]int{"generic-hmac": 1, "pagerduty": 1, "github": 1} {
		n, err := f.ctrl.Metric("stackpilot_alerts_sent_total", `provider="`+provider+`"`, `outcome="success"`)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(BeEquivalentTo(want), provider)
	}
	// The Alert whose Secret is missing gave up on its message at once.
	n, err := f.ctrl.Metric("stackpilot_alerts_sent_total", `provider="generic-hmac"`, `outcome="failure"`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeEquivalentTo(1))
}

// TestAlertHangingSinkDoesNotSlowReconciles: with an Alert whose endpoint
// accepts connections and never answers, a Stack it reports on applies new
// commits as fast as one it does not; the messages are given up on after
// their retries, with a Warning event and the Alert's status.
func TestAlertHangingSinkDoesNotSlowReconciles(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	// The quiet Stack's program writes its own ConfigMap.
	quietProgram := func(extra string) string {
		return replaceOnce(bridgeProgram(extra), "name: app-settings", "name: quiet-settings")
	}
	f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram(""), "quiet/Pulumi.yaml": quietProgram("")}, "quiet") // a commit is the whole tree
	sink := newAlertSink(t, true)
	f.start(t)
	logOnFailure(t, f)
	g.Expect(env.Client.Create(ctx, newAlert(f.ns, "hangs", v1alpha1.ProviderGeneric, sink.URL(), "", func(a *v1alpha1.Alert) {
		a.Spec.Stacks.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"alerts": "on"}}
	}))).To(Succeed())
	loud := f.stack("loud", func(s *v1alpha1.Stack) { s.Labels = map[string]string{"alerts": "on"} })
	quiet := f.stack("quiet", func(s *v1alpha1.Stack) {
		s.Spec.Source.Dir = "quiet"
	})
	g.Expect(env.Client.Create(ctx, loud)).To(Succeed())
	g.Expect(env.Client.Create(ctx, quiet)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(loud), "")
	waitApplied(t, client.ObjectKeyFromObject(quiet), "")
	g.Eventually(func() int { return len(sink.Requests()) }, 30*time.Second, 200*time.Millisecond).Should(Equal(1),
		"the first message is in flight, unanswered")

	for round := 1; round <= 2; round++ {
		extra := fmt.Sprintf("\n        round: r%d", round)
		next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram(extra), "quiet/Pulumi.yaml": quietProgram(extra)}, "next")
		start := time.Now()
		requestReconcile(t, client.ObjectKeyFromObject(loud))
		requestReconcile(t, client.ObjectKeyFromObject(quiet))
		done := map[string]time.Duration{}
		g.Eventually(func(g Gomega) {
			for _, s := range []*v1alpha1.Stack{loud, quiet} {
				if _, ok := done[s.Name]; ok {
					continue
				}
				got := getStack(g, client.ObjectKeyFromObject(s))
				if conditions.IsReady(got) && strings.HasSuffix(got.Status.LastAppliedRevision, next) {
					done[s.Name] = time.Since(start)
				}
			}
			g.Expect(done).To(HaveLen(2))
		}, 4*time.Minute, 200*time.Millisecond).Should(Succeed())
		t.Logf("round %d: applied with the sink hanging in %s, without an Alert in %s", round, done["loud"], done["quiet"])
		g.Expect(done["loud"]).To(BeNumerically("<", 2*done["quiet"]+5*time.Second), "a hanging endpoint does not slow the Stack it reports on")
	}
	g.Expect(len(sink.Requests())).To(BeNumerically("<=", 5), "one message in flight at a time, retried with backoff")

	// Given up after its tries (10s each, backoff 1s, 2s, 4s, 8s): an event and the status.
	g.Eventually(func(g Gomega) {
		var a v1alpha1.Alert
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hangs"}, &a)).To(Succeed())
		g.Expect(a.Status.Failures).To(BeNumerically(">=", 1))
		g.Expect(a.Status.LastError).To(ContainSubstring("no answer within 10s"))
		g.Expect(conditions.GetReason(&a, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.DeliveryFailedReason))
		g.Expect(hasLine(stackEvents(t, f.ns, "hangs"), v1alpha1.DeliveryFailedReason+": applied message of Stack "+f.ns+"/loud not delivered")).To(BeTrue())
	}, 3*time.Minute, time.Second).Should(Succeed())
	n, err := f.ctrl.Metric("stackpilot_alerts_sent_total", `provider="generic"`, `outcome="failure"`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeNumerically(">=", 1))
}

// TestAlertValidation: the API server refuses Alerts that could never send.
func TestAlertValidation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	for name, tc := range map[string]struct {
		alert *v1alpha1.Alert
		want  string
	}{
		"pagerduty without secret": {newAlert(ns, "a1", v1alpha1.ProviderPagerDuty, "", ""), `needs secretRef with a "token" key`},
		"generic without address":  {newAlert(ns, "a2", v1alpha1.ProviderGeneric, "", ""), "set address, or secretRef"},
		"address not http":         {newAlert(ns, "a3", v1alpha1.ProviderGeneric, "ftp://example.com/x", ""), "spec.provider.address"},
		"unknown type":             {newAlert(ns, "a4", "email", "https://example.com", ""), "spec.provider.type"},
		"unknown event": {newAlert(ns, "a5", v1alpha1.ProviderGeneric, "https://example.com", "", func(a *v1alpha1.Alert) {
			a.Spec.Events = []v1alpha1.AlertEventType{"exploded"}
		}), "spec.events"},
	} {
		err := env.Client.Create(ctx, tc.alert)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(ContainSubstring(tc.want), name)
	}
	ok := newAlert(ns, "fine", v1alpha1.ProviderGitHub, "", "github-token")
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed(), "github with a Secret and the default address")
}
