package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	resp, err := e.get(ctx, wire.PlanURL(e.base, ns, name, id), wire.ContentJSON)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the plan from %s: %w", e.via, err)
	}
	if len(body) > maxPlanBytes {
		return nil, fmt.Errorf("%s answered more than %d MiB: not a plan", e.via, maxPlanBytes>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, e.refusal(resp.StatusCode, body, "the plans", ns, name, func(msg string) error {
			return &planNotFoundError{msg: fmt.Sprintf("%s has no such plan: %s", e.via, msg)}
		})
	}
	var d plan.Document
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("%s answered something that is not a plan: %v", e.via, err)
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
// Stack ns/name (wire.PolicyInputContent), its errors as fetchPlan's.
func (e *endpoint) fetchPolicyInput(ctx context.Context, ns, name, id string) (*plan.PolicyInput, error) {
	resp, err := e.get(ctx, wire.PolicyInputURL(e.base, ns, name, id), wire.ContentJSON)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 2*maxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the plan from %s: %w", e.via, err)
	}
	if len(body) > 2*maxPlanBytes {
		return nil, fmt.Errorf("%s answered more than %d MiB: not a plan", e.via, 2*maxPlanBytes>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, e.refusal(resp.StatusCode, body, "the plans", ns, name, func(msg string) error {
			return &planNotFoundError{msg: fmt.Sprintf("%s has no such plan: %s", e.via, msg)}
		})
	}
	var in plan.PolicyInput
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("%s answered something that is not a plan: %v", e.via, err)
	}
	switch {
	case in.APIVersion != plan.PolicyInputAPIVersion:
		return nil, fmt.Errorf("%s answered apiVersion %q; this CLI reads %s: use a CLI of the controller's version", e.via, in.APIVersion, plan.PolicyInputAPIVersion)
	case in.ID != id || in.Namespace != ns || in.Name != name:
		return nil, fmt.Errorf("%s answered plan %s of %s/%s, not plan %s of %s/%s", e.via, in.ID, in.Namespace, in.Name, id, ns, name)
	}
	return &in, nil
}
