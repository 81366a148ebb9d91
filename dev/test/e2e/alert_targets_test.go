package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestAlertNoRedirectsNoProbing: an Alert's address answering 302 to a
// second local port is not followed (a redirect would turn the POST into a
// GET to wherever the answer says): the second port sees no request, and
// the Alert says the redirect was refused. An Alert at a closed port reports
// a generic class of failure, not the connection error's text: the status
// must not make the controller a port scanner for whoever may write Alerts.
func TestAlertNoRedirectsNoProbing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	target := newAlertSink(t, false)
	var redirects atomic.Int64
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirects.Add(1)
		http.Redirect(w, r, target.URL()+"/stolen", http.StatusFound)
	}))
	t.Cleanup(redirector.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	closedAddr := ln.Addr().String()
	g.Expect(ln.Close()).To(Succeed())
	_, closedPort, _ := net.SplitHostPort(closedAddr)

	f.start(t)
	logOnFailure(t, f)
	for _, a := range []*v1alpha1.Alert{
		newAlert(f.ns, "redirected", v1alpha1.ProviderGeneric, redirector.URL+"/hook", ""),
		newAlert(f.ns, "closed", v1alpha1.ProviderGeneric, "http://"+closedAddr+"/hook", ""),
	} {
		g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	}
	stack := f.stack("reported")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(stack), f.commit)

	given := func(name string) *v1alpha1.Alert {
		t.Helper()
		var a v1alpha1.Alert
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &a)).To(Succeed())
			g.Expect(a.Status.Failures).To(BeNumerically(">=", 1), "given up on the applied message")
			g.Expect(conditions.GetReason(&a, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.DeliveryFailedReason))
		}, 3*time.Minute, time.Second).Should(Succeed())
		return &a
	}
	a := given("redirected")
	g.Expect(redirects.Load()).To(BeNumerically(">=", 1), "the Alert's own address was called")
	g.Expect(target.Requests()).To(BeEmpty(), "the redirect's target got no request")
	g.Expect(a.Status.LastError).To(ContainSubstring("answered 302 Found, a redirect, which is not followed"))
	g.Expect(a.Status.LastError).NotTo(ContainSubstring(strings.TrimPrefix(target.URL(), "http://")))

	a = given("closed")
	g.Expect(a.Status.LastError).To(ContainSubstring("could not connect"))
	for _, detail := range []string{"refused", "dial", "tcp", closedPort} {
		g.Expect(a.Status.LastError).NotTo(ContainSubstring(detail), "the connection error's text stays out of the status")
		g.Expect(strings.Join(stackEvents(t, f.ns, "closed"), "\n")).NotTo(ContainSubstring(detail))
	}
	g.Expect(target.Requests()).To(BeEmpty())
}

// TestAlertDenyInternalAddresses: with --notification-deny-internal-addresses
// the controller sends nothing to a loopback (or link-local) address, even
// one a host name resolves to: the check is made on the address dialled.
// The Alert says why, and the sink sees no request.
func TestAlertDenyInternalAddresses(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	sink := newAlertSink(t, false)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(sink.URL(), "http://"))
	f.start(t, "--notification-deny-internal-addresses")
	logOnFailure(t, f)
	for _, a := range []*v1alpha1.Alert{
		newAlert(f.ns, "loopback", v1alpha1.ProviderGeneric, sink.URL()+"/hook", ""),
		newAlert(f.ns, "by-name", v1alpha1.ProviderGeneric, "http://localhost:"+port+"/hook", ""),
	} {
		g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	}
	stack := f.stack("reported")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(stack), f.commit)

	for _, name := range []string{"loopback", "by-name"} {
		var a v1alpha1.Alert
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &a)).To(Succeed())
			g.Expect(a.Status.Failures).To(BeNumerically(">=", 1), "given up on the applied message")
		}, 3*time.Minute, time.Second).Should(Succeed())
		g.Expect(a.Status.LastError).To(ContainSubstring("a loopback or link-local address, which --notification-deny-internal-addresses refuses"), name)
	}
	g.Expect(sink.Requests()).To(BeEmpty(), "nothing reached the loopback sink")
}
