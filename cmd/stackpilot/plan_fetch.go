package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/wire"
)

// The full plans are read from the controller's listener (endpoint.go),
// beside the engine logs.
const (
	// maxPlanBytes bounds a Document read: a plan of 100,000 resources is
	// some tens of MiB; a larger answer is not a plan.
	maxPlanBytes = 64 << 20
	// planFetchTimeout bounds one read; the fallback is there for a
	// controller that does not answer.
	planFetchTimeout = 15 * time.Second
)

// planNotFoundError is the controller's own 404: it runs, but holds no such
// plan (replaced, applied, or its data dir was lost).
type planNotFoundError struct{ msg string }

func (e *planNotFoundError) Error() string { return e.msg }

// fetchPlan reads plan id of Stack ns/name. Every error says what to check;
// the caller falls back to status.pendingPlan on any of them. Without a
// token the request goes anyway: a server given with --controller-url may
// not ask, and the controller's 401 is explained with why there was none.
func (e *endpoint) fetchPlan(ctx context.Context, ns, name, id string) (*plan.Document, error) {
	var d plan.Document
	if err := e.getPlanJSON(ctx, wire.PlanURL(e.base, ns, name, id), maxPlanBytes, ns, name, &d); err != nil {
		return nil, err
	}
	switch {
	case d.APIVersion != plan.APIVersion:
		return nil, fmt.Errorf("%s answered a plan of apiVersion %q; this CLI reads %s: use a CLI of the controller's version", e.via, d.APIVersion, plan.APIVersion)
	case d.ID != id || d.Namespace != ns || d.Name != name:
		return nil, fmt.Errorf("%s answered plan %s of %s/%s, not plan %s of %s/%s", e.via, d.ID, d.Namespace, d.Name, id, ns, name)
	}
	return &d, nil
}

// fetchPolicyInput reads what policy rules are tested on of plan id of
// Stack ns/name (wire.PolicyInputContent), its errors as fetchPlan's. It
// holds the update plan and the prior inputs: twice a Document's bound.
func (e *endpoint) fetchPolicyInput(ctx context.Context, ns, name, id string) (*plan.PolicyInput, error) {
	var in plan.PolicyInput
	if err := e.getPlanJSON(ctx, wire.PolicyInputURL(e.base, ns, name, id), 2*maxPlanBytes, ns, name, &in); err != nil {
		return nil, err
	}
	switch {
	case in.APIVersion != plan.PolicyInputAPIVersion:
		return nil, fmt.Errorf("%s answered apiVersion %q; this CLI reads %s: use a CLI of the controller's version", e.via, in.APIVersion, plan.PolicyInputAPIVersion)
	case in.ID != id || in.Namespace != ns || in.Name != name:
		return nil, fmt.Errorf("%s answered plan %s of %s/%s, not plan %s of %s/%s", e.via, in.ID, in.Namespace, in.Name, id, ns, name)
	}
	return &in, nil
}

// getPlanJSON reads u, at most limit bytes, into v: an answer of the plans
// path of Stack ns/name.
func (e *endpoint) getPlanJSON(ctx context.Context, u *url.URL, limit int64, ns, name string, v any) error {
	resp, err := e.get(ctx, u, wire.ContentJSON)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("reading the plan from %s: %w", e.via, err)
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("%s answered more than %d MiB: not a plan", e.via, limit>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return e.refusal(resp.StatusCode, body, "the plans", ns, name, func(msg string) error {
			return &planNotFoundError{msg: fmt.Sprintf("%s has no such plan: %s", e.via, msg)}
		})
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s answered something that is not a plan: %v", e.via, err)
	}
	return nil
}
