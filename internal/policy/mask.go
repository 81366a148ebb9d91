package policy

import (
	"encoding/json"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/sig"
)

// MaskSecrets returns v, a value in Pulumi's state form, with every secret
// emptied to the bare marker {sig.Key: sig.Secret}: its plaintext and its
// ciphertext are dropped, so what is left can be shown to whoever may read
// the Stack. DecodeState reads such a secret as Secret{Unknown}: a rule that
// depends on it is undetermined. An output value marked secret is masked the
// same way. v is not changed.
func MaskSecrets(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = MaskSecrets(e)
		}
		return out
	case map[string]any:
		signature, _ := v[sig.Key].(string)
		secretOutput, _ := v["secret"].(bool)
		if signature == sig.Secret || (signature == sig.OutputValue && secretOutput) {
			return map[string]any{sig.Key: sig.Secret}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = MaskSecrets(e)
		}
		return out
	}
	return v
}

// MaskPlanSecrets is MaskSecrets over a Pulumi update plan file: the plan
// with no secret's ciphertext in it.
func MaskPlanSecrets(data []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("not a Pulumi update plan: %w", err)
	}
	return json.Marshal(MaskSecrets(v))
}
