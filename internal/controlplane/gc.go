package controlplane

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// waitForGarbageCollector proves the garbage collector runs: a ConfigMap
// deleted with foreground propagation disappears only once the collector has
// removed its foregroundDeletion finalizer.
func waitForGarbageCollector(ctx context.Context, cfg *rest.Config, timeout time.Duration, exited func() error) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cms := cs.CoreV1().ConfigMaps("default")
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "controlplane-gc-probe"}}
	if _, err := cms.Create(ctx, probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("controlplane: garbage collector probe: %w", err)
	}
	foreground := metav1.DeletePropagationForeground
	if err := cms.Delete(ctx, probe.Name, metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		return fmt.Errorf("controlplane: garbage collector probe: %w", err)
	}
	return poll(ctx, timeout, "the garbage collector to finish a foreground delete", exited, func() (bool, error) {
		_, err := cms.Get(ctx, probe.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// poll calls cond until it returns true or an error, timeout passes, or a
// component exits.
func poll(ctx context.Context, timeout time.Duration, what string, exited func() error, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("controlplane: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if err := exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: waiting for %s: not done within %s", what, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
