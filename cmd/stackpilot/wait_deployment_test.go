package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A wait that times out says how far the rollout got, even when later reads
// failed, or were refused because the deadline was near (the client's rate
// limiter will not wait past it): what the Deployment said is kept. Before
// it was read, a read's error is the reason, but not a refusal for the
// deadline.
func TestWaitDeploymentKeepsWhatItSaw(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "stackpilot-system", Name: "stackpilot-controller"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 2},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1}}
	limiter := errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")

	// The second read fails (the API server restarting), the third as near
	// the deadline, which comes with it: driven by the reads, not by a clock.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := 0
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(d).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch reads++; reads {
			case 1:
				return c.Get(ctx, k, obj, opts...)
			case 2:
				return errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
			}
			cancel()
			return limiter
		},
	}).Build()
	err := waitDeployment(ctx, cl, key)
	if err == nil || !strings.Contains(err.Error(), "is not ready: the Deployment controller has not seen its latest spec yet;") {
		t.Errorf("after %d reads: %v; want what the Deployment said", reads, err)
	}
	if reads < 3 {
		t.Errorf("%d reads: the failed reads this test is about never happened", reads)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	reads = 0
	never := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			if reads++; reads == 1 {
				return errors.New(`deployments.apps "stackpilot-controller" is forbidden: User "alice" cannot get resource "deployments"`)
			}
			if reads == 3 {
				cancel()
			}
			return limiter
		},
	}).Build()
	if err := waitDeployment(ctx, never, key); err == nil || !strings.Contains(err.Error(), "is not ready: deployments.apps \"stackpilot-controller\" is forbidden") {
		t.Errorf("never read: %v; want the first read's error", err)
	}
}
