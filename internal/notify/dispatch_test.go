package notify

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

const stackSecret = "stack-s3cret-value-1234"

// rig is a Notifier with a fake API (Alerts and Secrets) and a real HTTP endpoint.
type rig struct {
	n      *Notifier
	rec    *record.FakeRecorder
	mu     sync.Mutex
	bodies []string
	hits   atomic.Int32
}

func newRig(t *testing.T, handler func(w http.ResponseWriter, r *http.Request), alert func(*v1alpha1.Alert)) *rig {
	t.Helper()
	rg := &rig{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rg.mu.Lock()
		rg.bodies = append(rg.bodies, string(b))
		rg.mu.Unlock()
		rg.hits.Add(1)
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	a := &v1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
		Spec: v1alpha1.AlertSpec{Provider: v1alpha1.AlertProvider{Type: v1alpha1.ProviderGeneric, Address: srv.URL + "/hook-path-s3cret"}}}
	if alert != nil {
		alert(a)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(a,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-secrets"}, Data: map[string][]byte{"token": []byte(stackSecret)}},
	).Build()
	rg.rec = record.NewFakeRecorder(100)
	rg.n = New(c, c, rg.rec, false)
	rg.n.Backoff, rg.n.Timeout = 10*time.Millisecond, 200*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rg.n.Start(ctx)
	return rg
}

// failingStack is a Stack that reads app-secrets, applied then failed with
// an error that quotes the secret (as a careless tool might).
func failingStack(ready metav1.ConditionStatus, reason string) *v1alpha1.Stack {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}
	s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
	s.Status.LastAppliedRevision = "main@sha1:0123456789abcdef0123456789abcdef01234567"
	s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: ready, Reason: reason,
		Message: "login with " + stackSecret + " refused\nmore " + stackSecret}}
	return s
}

func (rg *rig) waitStats(t *testing.T, ok func(Stats) bool) Stats {
	t.Helper()
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := rg.n.Stats(key)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDeliverScrubsStackSecrets(t *testing.T) {
	rg := newRig(t, func(w http.ResponseWriter, r *http.Request) {}, nil)
	ctx := context.Background()
	rg.n.Observe(ctx, failingStack(metav1.ConditionTrue, "Succeeded"), nil)
	rg.n.Observe(ctx, failingStack(metav1.ConditionFalse, v1alpha1.ProgramErrorReason), failingStack(metav1.ConditionTrue, "Succeeded"))
	rg.waitStats(t, func(s Stats) bool { return s.Sent == 1 })
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if len(rg.bodies) != 1 || !strings.Contains(rg.bodies[0], `"event":"failed"`) {
		t.Fatalf("bodies %q", rg.bodies)
	}
	for _, secret := range []string{stackSecret, "hook-path-s3cret"} {
		if strings.Contains(rg.bodies[0], secret) {
			t.Errorf("payload carries %q: %s", secret, rg.bodies[0])
		}
	}
	if !strings.Contains(rg.bodies[0], "login with [redacted] refused") || strings.Contains(rg.bodies[0], "more") {
		t.Errorf("the error's first line, scrubbed: %s", rg.bodies[0])
	}
}

func TestDeliverRetriesThenSucceeds(t *testing.T) {
	rg := &rig{}
	rg = newRig(t, func(w http.ResponseWriter, r *http.Request) {
		if rg.hits.Load() < 3 {
			w.WriteHeader(http.StatusBadGateway)
		}
	}, nil)
	rg.n.enqueue(types.NamespacedName{Namespace: "ns", Name: "a"}, sampleEvent(v1alpha1.EventFailed))
	s := rg.waitStats(t, func(s Stats) bool { return s.Sent == 1 })
	if rg.hits.Load() != 3 || s.Failures != 0 || s.Failing {
		t.Errorf("hits %d, stats %+v", rg.hits.Load(), s)
	}
}

func TestDeliverGivesUpWithEventAndStatus(t *testing.T) {
	rg := newRig(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }, nil)
	rg.n.enqueue(types.NamespacedName{Namespace: "ns", Name: "a"}, sampleEvent(v1alpha1.EventFailed))
	s := rg.waitStats(t, func(s Stats) bool { return s.Failures == 1 })
	if rg.hits.Load() != DefaultTries || !s.Failing || !strings.Contains(s.LastError, "503") {
		t.Errorf("hits %d, stats %+v", rg.hits.Load(), s)
	}
	if strings.Contains(s.LastError, "hook-path-s3cret") || strings.Contains(s.LastError, "127.0.0.1") && strings.Contains(s.LastError, "/hook") {
		t.Errorf("lastError names the address: %q", s.LastError)
	}
	select {
	case e := <-rg.rec.Events:
		if !strings.HasPrefix(e, "Warning DeliveryFailed failed message of Stack infra/network not delivered") {
			t.Errorf("event %q", e)
		}
	case <-time.After(time.Second):
		t.Error("no event")
	}
}

func TestDeliverPermanentErrorIsNotRetried(t *testing.T) {
	rg := newRig(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }, nil)
	rg.n.enqueue(types.NamespacedName{Namespace: "ns", Name: "a"}, sampleEvent(v1alpha1.EventFailed))
	rg.waitStats(t, func(s Stats) bool { return s.Failures == 1 })
	if rg.hits.Load() != 1 {
		t.Errorf("hits %d", rg.hits.Load())
	}
}

// A hanging endpoint: observing never blocks, the queue is bounded and an
// overflow is dropped and counted.
func TestHangingEndpointNeverBlocksAndQueueIsBounded(t *testing.T) {
	release := make(chan struct{})
	rg := newRig(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, nil)
	defer close(release)
	rg.n.Timeout, rg.n.QueueSize = time.Hour, 3
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	done := make(chan struct{})
	go func() {
		for i := 0; i < 10; i++ {
			rg.n.enqueue(key, sampleEvent(v1alpha1.EventFailed))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("enqueue blocks on a hanging endpoint")
	}
	// One in flight, three queued, six dropped (the first may not be taken yet: 6 or 7).
	s := rg.waitStats(t, func(s Stats) bool { return s.Failures >= 6 })
	if s.Failures > 7 || !strings.Contains(s.LastError, "queue full") {
		t.Errorf("stats %+v", s)
	}
}

func TestSuspendedAndUnselectedAlertsSendNothing(t *testing.T) {
	for name, mutate := range map[string]func(*v1alpha1.Alert){
		"suspended": func(a *v1alpha1.Alert) { a.Spec.Suspend = true },
		"by name":   func(a *v1alpha1.Alert) { a.Spec.Stacks.Names = []string{"other"} },
		"by label": func(a *v1alpha1.Alert) {
			a.Spec.Stacks.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
		},
		"by event": func(a *v1alpha1.Alert) { a.Spec.Events = []v1alpha1.AlertEventType{v1alpha1.EventDrifted} },
	} {
		t.Run(name, func(t *testing.T) {
			rg := newRig(t, func(w http.ResponseWriter, r *http.Request) {}, mutate)
			ctx := context.Background()
			rg.n.Observe(ctx, failingStack(metav1.ConditionFalse, v1alpha1.ProgramErrorReason), failingStack(metav1.ConditionTrue, "Succeeded"))
			time.Sleep(100 * time.Millisecond)
			if rg.hits.Load() != 0 {
				t.Errorf("sent %d", rg.hits.Load())
			}
		})
	}
}

func TestSelects(t *testing.T) {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"team": "a"}}}
	a := &v1alpha1.Alert{}
	if !Selects(a, s) {
		t.Error("empty selects all")
	}
	a.Spec.Stacks.Names = []string{"app"}
	a.Spec.Stacks.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	if !Selects(a, s) {
		t.Error("by name, or")
	}
	a.Spec.Stacks.Names = nil
	if Selects(a, s) {
		t.Error("label mismatch")
	}
	a.Spec.Stacks.Selector.MatchLabels["team"] = "a"
	if !Selects(a, s) {
		t.Error("label match")
	}
}

var _ client.Reader = fake.NewClientBuilder().Build()
