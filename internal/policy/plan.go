package policy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/sig"
)

// Pulumi's engine asks a policy analyzer about each resource the program
// registers, before the provider's Diff: it never says whether the change
// will be a replace, and never asks about a delete (a resource the program
// no longer declares is deleted after the program ends, and the stack-wide
// analysis runs after that: pkg/resource/deploy's deploymentExecutor.Execute
// in Pulumi v3.276). Rules for replaces and deletes are therefore evaluated
// on an update plan (`pulumi preview --save-plan`), where every step is
// known, before the update that the same plan then pins (`pulumi up
// --plan`). PlanChanges reads such a plan.

// Same is the operation of a resource whose inputs do not change. A rule
// without match.operations applies to it (the policy holds for what the
// program declares); one that lists operations does not.
const Same = "same"

// planFile is the part of Pulumi's update plan (apitype.DeploymentPlanV1)
// a rule needs: per URN, the steps and the goal's inputs as a diff from the
// prior inputs.
type planFile struct {
	// Version and Plan are set when the file is a VersionedDeploymentPlan.
	Version       int                     `json:"version"`
	Plan          json.RawMessage         `json:"plan"`
	ResourcePlans map[string]resourcePlan `json:"resourcePlans"`
}

type resourcePlan struct {
	Goal  *planGoal `json:"goal"`
	Steps []string  `json:"steps"`
}

type planGoal struct {
	Type      string   `json:"type"`
	Name      string   `json:"name"`
	Provider  string   `json:"provider"`
	InputDiff planDiff `json:"inputDiff"`
}

// planDiff holds whole top-level inputs: those added and those changed (with
// their new values), and the names of those removed.
type planDiff struct {
	Adds    map[string]any `json:"adds"`
	Deletes []string       `json:"deletes"`
	Updates map[string]any `json:"updates"`
}

// Decrypter opens a secret the plan holds as ciphertext (the stack's
// secrets provider); nil, or an error, leaves the secret Unknown.
type Decrypter func(ciphertext string) (string, error)

// PlanChanges reads an update plan and returns the change it holds for each
// resource, in URN order: the operation (create, update, replace, delete or
// Same), the type and name, the inputs the change leaves (prior inputs with
// the plan's diff applied; none for a delete) and the prior inputs. prior
// holds each resource's inputs before the change, by URN; a plan alone
// gives only the inputs it changes, so without prior an update's unchanged
// inputs are missing. Steps that change no managed resource (reads,
// refreshes) are left out.
func PlanChanges(data []byte, prior map[string]map[string]any, decrypt Decrypter) ([]Resource, error) {
	var f planFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a Pulumi update plan (the file `pulumi preview --save-plan` writes): %w", err)
	}
	if len(f.Plan) > 0 {
		if err := json.Unmarshal(f.Plan, &f); err != nil {
			return nil, fmt.Errorf("not a Pulumi update plan: %w", err)
		}
	}
	if f.ResourcePlans == nil {
		return nil, fmt.Errorf("not a Pulumi update plan: it has no resourcePlans")
	}
	urns := make([]string, 0, len(f.ResourcePlans))
	for urn := range f.ResourcePlans {
		urns = append(urns, urn)
	}
	sort.Strings(urns)
	var out []Resource
	for _, urn := range urns {
		rp := f.ResourcePlans[urn]
		op := planOperation(rp.Steps)
		if op == "" {
			continue
		}
		typ, name := SplitURN(urn)
		old, err := DecodeInputs(prior[urn], decrypt)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", urn, err)
		}
		r := Resource{URN: urn, Type: typ, Name: name, Op: op, OldInputs: old}
		if rp.Goal != nil {
			if rp.Goal.Type != "" {
				r.Type = rp.Goal.Type
			}
			if rp.Goal.Name != "" {
				r.Name = rp.Goal.Name
			}
			r.Provider.URN = providerURN(rp.Goal.Provider)
			inputs, err := applyDiff(old, rp.Goal.InputDiff, decrypt)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", urn, err)
			}
			r.Inputs = inputs
		}
		if op == string(Delete) {
			r.Inputs = map[string]any{}
		}
		out = append(out, r)
	}
	return out, nil
}

// planOperation is the one operation a resource's steps amount to, or ""
// when they change no managed resource.
func planOperation(steps []string) string {
	op := ""
	for _, s := range steps {
		switch s {
		case "replace", "create-replacement", "delete-replaced", "import-replacement":
			return string(Replace)
		case "create", "import":
			op = string(Create)
		case "update":
			op = string(Update)
		case "delete":
			if op == "" {
				op = string(Delete)
			}
		case "same":
			if op == "" {
				op = Same
			}
		}
	}
	return op
}

// SplitURN returns the type (the last of a URN's qualified type) and the
// name of urn:pulumi:<stack>::<project>::<qualified type>::<name>.
func SplitURN(urn string) (typ, name string) {
	parts := strings.SplitN(urn, "::", 4)
	if len(parts) != 4 {
		return "", urn
	}
	qualified := parts[2]
	if i := strings.LastIndex(qualified, "$"); i >= 0 {
		qualified = qualified[i+1:]
	}
	return qualified, parts[3]
}

// providerURN is a provider reference (<urn>::<id>) without its ID.
func providerURN(ref string) string {
	if i := strings.LastIndex(ref, "::"); i > 0 && strings.HasPrefix(ref, "urn:") && strings.Count(ref, "::") > 3 {
		return ref[:i]
	}
	return ref
}

// applyDiff is prior with diff applied, values decoded.
func applyDiff(prior map[string]any, diff planDiff, decrypt Decrypter) (map[string]any, error) {
	out := make(map[string]any, len(prior)+len(diff.Adds))
	for k, v := range prior {
		out[k] = v
	}
	for _, k := range diff.Deletes {
		delete(out, k)
	}
	for _, m := range []map[string]any{diff.Adds, diff.Updates} {
		for k, v := range m {
			if strings.HasPrefix(k, "__") {
				continue
			}
			d, err := DecodeState(v, decrypt)
			if err != nil {
				return nil, fmt.Errorf("input %q: %w", k, err)
			}
			out[k] = d
		}
	}
	return out, nil
}

// DecodeInputs is DecodeState over a resource's inputs; nil stays nil.
func DecodeInputs(inputs map[string]any, decrypt Decrypter) (map[string]any, error) {
	if inputs == nil {
		return nil, nil
	}
	out := make(map[string]any, len(inputs))
	for k, v := range inputs {
		d, err := DecodeState(v, decrypt)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", k, err)
		}
		out[k] = d
	}
	return out, nil
}

// DecodeState reads a value as Pulumi serializes properties in its state
// and plans (JSON, special values marked by sig.Key) into what rules see:
// Secret around secrets (opened with decrypt, else Unknown inside), Unknown
// for values computed later, an asset or archive as what identifies it, a
// resource reference as its URN.
func DecodeState(v any, decrypt Decrypter) (any, error) {
	switch v := v.(type) {
	case string:
		if unknownStrings[v] {
			return Unknown{}, nil
		}
		return v, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			d, err := DecodeState(e, decrypt)
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	case map[string]any:
		return decodeStateObject(v, decrypt)
	}
	return v, nil
}

// unknownStrings are the strings that stand for an unknown value of each
// kind.
var unknownStrings = map[string]bool{
	sig.UnknownBoolValue: true, sig.UnknownNumberValue: true, sig.UnknownStringValue: true,
	sig.UnknownArrayValue: true, sig.UnknownAssetValue: true, sig.UnknownArchiveValue: true,
	sig.UnknownObjectValue: true,
}

func decodeStateObject(m map[string]any, decrypt Decrypter) (any, error) {
	signature, special := m[sig.Key].(string)
	if !special {
		out := make(map[string]any, len(m))
		for k, e := range m {
			d, err := DecodeState(e, decrypt)
			if err != nil {
				return nil, err
			}
			out[k] = d
		}
		return out, nil
	}
	switch signature {
	case sig.Secret:
		return decodeSecret(m, decrypt)
	case sig.ResourceReference:
		return m["urn"], nil
	case sig.AssetSig, sig.ArchiveSig:
		out := map[string]any{}
		for _, k := range []string{"hash", "path", "uri"} {
			if e, ok := m[k]; ok {
				out[k] = e
			}
		}
		return out, nil
	case sig.OutputValue:
		value, known := m["value"]
		if !known {
			return Unknown{}, nil
		}
		d, err := DecodeState(value, decrypt)
		if err != nil {
			return nil, err
		}
		if secret, _ := m["secret"].(bool); secret {
			return Secret{Value: d}, nil
		}
		return d, nil
	}
	return m, nil
}

// decodeSecret reads {sig.Key: sig.Secret, "plaintext"|"ciphertext"|"value"}.
// The plaintext and decrypted ciphertext are the value's JSON.
func decodeSecret(m map[string]any, decrypt Decrypter) (any, error) {
	if v, ok := m["value"]; ok {
		d, err := DecodeState(v, decrypt)
		return Secret{Value: d}, err
	}
	text, plain := m["plaintext"].(string)
	if !plain {
		cipher, _ := m["ciphertext"].(string)
		if decrypt == nil || cipher == "" {
			return Secret{Value: Unknown{}}, nil
		}
		t, err := decrypt(cipher)
		if err != nil {
			return Secret{Value: Unknown{}}, nil
		}
		text = t
	}
	var inner any
	if err := json.Unmarshal([]byte(text), &inner); err != nil {
		// Never quote the text: it is the secret.
		return nil, fmt.Errorf("a secret value is not JSON")
	}
	d, err := DecodeState(inner, decrypt)
	return Secret{Value: d}, err
}
