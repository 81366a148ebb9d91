package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/stackpilot/stackpilot/internal/atomicfile"
	"github.com/stackpilot/stackpilot/internal/policy"
)

// A plan that waits for approval can be tested against policies before
// anyone applies it (`stackpilot policy test --stack`). Pulumi's update plan
// holds only the inputs a change sets, so beside it the preview keeps the
// inputs of the stack's resources as they were before the change, secrets
// masked: a rule then sees an update's unchanged inputs and its oldInputs as
// the controller's own check does.

// PlanInputsFile is where a preview with Spec.Plan keeps the prior inputs of
// the plan at plan: beside it, in the same folder.
func PlanInputsFile(plan string) string {
	return filepath.Join(filepath.Dir(plan), "prior-inputs.json")
}

// PlanInputs is the document at PlanInputsFile: each resource's inputs
// before the change, by URN, in Pulumi's state form, every secret emptied
// to its marker (policy.MaskSecrets).
type PlanInputs struct {
	Resources map[string]map[string]any `json:"resources"`
}

// savePlanInputs writes PlanInputsFile after a preview that saved a plan.
// With a policy the inputs were read already; without, they cost a read of
// a file:// backend's checkpoint, or one `pulumi stack export` elsewhere,
// only for the previews whose plan waits for a person. A failure costs the
// plan nothing (it applies as it is), so it is written to the engine log,
// and the plan's tests then say the inputs are missing.
func (o *operation) savePlanInputs(ctx context.Context, pr *policyRun, human *engineLog) {
	if o.spec.Type != OpPreview || o.spec.Plan == "" {
		return
	}
	err := func() error {
		var prior map[string]map[string]any
		if pr != nil && pr.prior != nil {
			prior = pr.prior
		} else {
			read, err := o.priorInputs(ctx)
			if err != nil {
				return err
			}
			prior = read
		}
		doc := PlanInputs{Resources: make(map[string]map[string]any, len(prior))}
		for urn, inputs := range prior {
			masked, _ := policy.MaskSecrets(map[string]any(inputs)).(map[string]any)
			doc.Resources[urn] = masked
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		return atomicfile.Write(PlanInputsFile(o.spec.Plan), b, 0o600)
	}()
	if err != nil && human != nil {
		human.line([]byte(fmt.Sprintf("stackpilot: the plan is kept without the resources' inputs before the change, which `stackpilot policy test --stack` reads: %v\n", err)))
	}
}
