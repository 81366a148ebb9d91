package main

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// reconcileSource asks the Stack's Flux source for a new artifact, like
// `flux reconcile source git`, and with wait polls it until it handled the
// request. Git and OCI sources of the Stack itself need nothing: the
// controller resolves them again at each reconcile.
func (c *cli) reconcileSource(ctx context.Context, g *stackGetter, s *v1alpha1.Stack, wait bool, deadline time.Time) error {
	ref := s.Spec.Source.SourceRef
	if ref == nil {
		fmt.Fprintf(c.stderr, "Stack %s/%s has no Flux source (spec.source.sourceRef): its own source is resolved again at every reconcile\n", s.Namespace, s.Name)
		return nil
	}
	if ref.Kind == "ExternalArtifact" {
		return fmt.Errorf("--with-source: an ExternalArtifact is made by another controller and cannot be asked to reconcile; run without --with-source")
	}
	ns := ref.Namespace
	if ns == "" {
		ns = s.Namespace
	}
	src, err := getFluxSource(ctx, g.cl, ref.Kind, ns, ref.Name)
	if err != nil {
		return fmt.Errorf("--with-source: reading %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
	}
	value := time.Now().UTC().Format(time.RFC3339Nano)
	if err := requestReconcile(ctx, g.cl, src, value); err != nil {
		return fmt.Errorf("--with-source: annotating %s %s/%s: %w (ask for patch on it)", ref.Kind, ns, ref.Name, err)
	}
	if !wait {
		fmt.Fprintf(c.stderr, "Requested a reconcile of %s %s/%s\n", ref.Kind, ns, ref.Name)
		return nil
	}
	fmt.Fprintf(c.stderr, "Reconciling %s %s/%s...\n", ref.Kind, ns, ref.Name)
	tick := time.NewTicker(reconcilePollInterval)
	defer tick.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted before %s %s/%s handled the request", ref.Kind, ns, ref.Name)
		}
		if err := g.cl.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
			return fmt.Errorf("--with-source: reading %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
		}
		if handled, _, _ := unstructured.NestedString(src.Object, "status", "lastHandledReconcileAt"); handled == value {
			return c.sourceReady(src, ref.Kind)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w waiting for %s %s/%s to handle the reconcile request: is Flux's source-controller running?", errTimeout, ref.Kind, ns, ref.Name)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// sourceReady reports the source's new artifact, or fails with its Ready
// message.
func (c *cli) sourceReady(src *unstructured.Unstructured, kind string) error {
	var status struct {
		Conditions []metav1Condition `json:"conditions"`
	}
	raw, _, _ := unstructured.NestedSlice(src.Object, "status", "conditions")
	for _, r := range raw {
		m, _ := r.(map[string]any)
		status.Conditions = append(status.Conditions, metav1Condition{
			Type: str(m["type"]), Status: str(m["status"]), Reason: str(m["reason"]), Message: str(m["message"]),
		})
	}
	for _, cond := range status.Conditions {
		if cond.Type == meta.ReadyCondition && cond.Status != "True" {
			return fmt.Errorf("%s %s/%s is not Ready (%s): %s", kind, src.GetNamespace(), src.GetName(), cond.Reason, cond.Message)
		}
	}
	rev, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "revision")
	fmt.Fprintf(c.stderr, "%s %s/%s: artifact %s\n", kind, src.GetNamespace(), src.GetName(), orDash(rev))
	return nil
}

type metav1Condition struct{ Type, Status, Reason, Message string }

func str(v any) string { s, _ := v.(string); return s }

// getFluxSource reads a source.toolkit.fluxcd.io object: v1, else v1beta2
// (OCIRepository before Flux 2.6).
func getFluxSource(ctx context.Context, cl client.Client, kind, ns, name string) (*unstructured.Unstructured, error) {
	var err error
	for _, v := range []string{"v1", "v1beta2"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: v, Kind: kind})
		if err = cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err == nil || !apimeta.IsNoMatchError(err) {
			return u, err
		}
	}
	return nil, fmt.Errorf("%w: is Flux installed?", err)
}
