package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/stackpilot/stackpilot/internal/policy"
)

// PolicyInputAPIVersion is the version of PolicyInput's JSON.
const PolicyInputAPIVersion = "policyinput.stackpilot.dev/v1alpha1"

// planInputsFile is what the runner keeps beside the update plan
// (runner.PlanInputsFile; store_test checks they agree).
const planInputsFile = "prior-inputs.json"

// PolicyInput is what `stackpilot policy test --stack` evaluates rules on: a
// stored plan's Pulumi update plan and the inputs of the stack's resources
// before it. Unlike the Document it holds values, the non-secret inputs as
// `pulumi preview --diff` shows them; every secret is masked to its bare
// marker (no plaintext, no ciphertext), which rules read as an unknown
// secret, and providers' inputs are left out (isProvider).
type PolicyInput struct {
	APIVersion string `json:"apiVersion"`
	// ID, Namespace, Name and Revision are the Document's.
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Revision  string `json:"revision"`
	// Plan is Pulumi's update plan (what `pulumi up --plan` applies),
	// secrets masked.
	Plan json.RawMessage `json:"plan"`
	// PriorInputs are each resource's inputs before the change, by URN, in
	// Pulumi's state form, secrets masked. Nil when the preview kept none
	// (the engine log says why): then an update's unchanged inputs are
	// unknown to rules.
	PriorInputs map[string]map[string]any `json:"priorInputs"`
}

// A provider's inputs are its configuration, where credentials are, marked
// secret or not (a kubeconfig, a token given as plain config): they are left
// out of a PolicyInput, as empty inputs.
func isProvider(urn string) bool {
	typ, _ := policy.SplitURN(urn)
	return strings.HasPrefix(typ, "pulumi:providers:")
}

// maskPlan is the update plan with every secret masked and providers'
// inputs left out.
func maskPlan(raw []byte) (json.RawMessage, error) {
	var f map[string]any
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("not a Pulumi update plan: %w", err)
	}
	plans, _ := f["resourcePlans"].(map[string]any)
	if inner, ok := f["plan"].(map[string]any); ok { // a versioned plan
		plans, _ = inner["resourcePlans"].(map[string]any)
	}
	for urn, p := range plans {
		goal, _ := p.(map[string]any)["goal"].(map[string]any)
		if isProvider(urn) && goal != nil {
			delete(goal, "inputDiff")
		}
	}
	return json.Marshal(policy.MaskSecrets(f))
}

// PolicyInput reads plan id of the Stack uid as a PolicyInput;
// ErrNotFound when the store holds no such plan.
func (s *Store) PolicyInput(uid types.UID, id string) (*PolicyInput, error) {
	doc, err := s.Document(uid, id)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(s.PlanFile(uid, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	masked, err := maskPlan(raw)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", id, err)
	}
	in := &PolicyInput{APIVersion: PolicyInputAPIVersion, ID: doc.ID, Namespace: doc.Namespace, Name: doc.Name,
		Revision: doc.Revision, Plan: masked}
	prior, err := os.ReadFile(s.PlanInputsFile(uid, id))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return in, nil
	case err != nil:
		return nil, err
	}
	var kept struct {
		Resources map[string]map[string]any `json:"resources"`
	}
	if err := json.Unmarshal(prior, &kept); err != nil {
		return nil, fmt.Errorf("plan %s: its prior inputs: %w", id, err)
	}
	// The runner masked them; masking again costs little and holds even for
	// a file an older runner wrote.
	in.PriorInputs = make(map[string]map[string]any, len(kept.Resources))
	for urn, inputs := range kept.Resources {
		if isProvider(urn) {
			in.PriorInputs[urn] = map[string]any{}
			continue
		}
		m, _ := policy.MaskSecrets(map[string]any(inputs)).(map[string]any)
		in.PriorInputs[urn] = m
	}
	return in, nil
}

// PlanInputsFile is the path of the prior inputs kept with a stored plan.
func (s *Store) PlanInputsFile(uid types.UID, id string) string {
	return filepath.Join(s.planDir(uid, id), planInputsFile)
}
