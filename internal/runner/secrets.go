package runner

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// secretNamespace holds the temporary keys secret leaves are encrypted under.
const secretNamespace = "stackpilot-secret-leaf"

// secretPlan is how the secret values reach the stack file: top-level scalars
// are set under their own key; each scalar leaf of an object or array is set
// under a temporary key, and its ciphertext is then moved into the structure.
type secretPlan struct {
	set        map[string]string // key -> plaintext: what `pulumi config set-all --secret` gets
	structured map[string]any    // real key -> value whose leaves are secretLeaf
	leaves     map[string]string // temporary key -> its ciphertext, after set-all
}

// secretLeaf marks the place of an encrypted leaf in a planned structure.
type secretLeaf string

// planSecrets prepares the secret values.
//
// Why this shape: Pulumi's form of a secret object is an object whose leaves are
// {secure: <ciphertext>}, what `pulumi config set --path --secret` writes. It is
// the only form that passes the CLI's check of a project's typed config
// ("type: object") and keeps the whole key secret. Building the tree here from
// one set-all call, instead of one --path per leaf, keeps key names literal
// (dots and brackets in names need no escaping) and keeps empty objects and
// arrays. Pulumi decrypts every secure leaf to a string, so numbers and bools
// inside a secret object reach the program as strings, exactly as with the CLI;
// a top-level secret number or bool is a string too, which every SDK's typed
// getters parse back. (`set-all --json` with a secret objectValue would keep the
// types, but fails in the pinned CLI: it parses the ciphertext as JSON.)
func planSecrets(secrets map[string]any) secretPlan {
	p := secretPlan{set: map[string]string{}, structured: map[string]any{}}
	keys := make([]string, 0, len(secrets))
	for k := range secrets {
		keys = append(keys, k)
	}
	sort.Strings(keys) // stable temporary names
	n := 0
	var plan func(v any) any
	plan = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(t))
			for _, k := range sortedKeys(t) {
				out[k] = plan(t[k])
			}
			return out
		case []any:
			out := make([]any, len(t))
			for i, e := range t {
				out[i] = plan(e)
			}
			return out
		case nil:
			return nil
		default:
			tmp := fmt.Sprintf("%s:l%d", secretNamespace, n)
			n++
			p.set[tmp] = scalarText(t)
			return secretLeaf(tmp)
		}
	}
	for _, k := range keys {
		switch v := secrets[k].(type) {
		case map[string]any, []any:
			p.structured[k] = plan(v)
		default:
			p.set[k] = scalarText(v)
		}
	}
	return p
}

// setKeys is plan.set as a map[string]any, for sortedKeys.
func (p secretPlan) setKeys() map[string]any {
	m := make(map[string]any, len(p.set))
	for k := range p.set {
		m[k] = nil
	}
	return m
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func scalarText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'g', -1, 64)
	default:
		return fmt.Sprint(t)
	}
}

// fill replaces the planned leaves of v with their ciphertexts.
func (p secretPlan) fill(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			f, err := p.fill(e)
			if err != nil {
				return nil, err
			}
			out[k] = f
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			f, err := p.fill(e)
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	case secretLeaf:
		ct, ok := p.leaves[string(t)]
		if !ok {
			return nil, fmt.Errorf("the CLI did not encrypt %s", t)
		}
		return map[string]any{"secure": ct}, nil
	default:
		return v, nil
	}
}

// placeSecretLeaves moves the ciphertexts of the temporary keys into the
// structured secret values of the stack file, and removes the temporary keys.
func placeSecretLeaves(path string, plan secretPlan) error {
	doc, err := readStackDoc(path)
	if err != nil {
		return err
	}
	cfg := stackConfig(doc)
	plan.leaves = map[string]string{}
	for k, v := range cfg {
		if !strings.HasPrefix(k, secretNamespace+":") {
			continue
		}
		if m, ok := v.(map[string]any); ok {
			if ct, ok := m["secure"].(string); ok {
				plan.leaves[k] = ct
			}
		}
		delete(cfg, k)
	}
	for k, v := range plan.structured {
		filled, err := plan.fill(v)
		if err != nil {
			return err
		}
		cfg[k] = filled
	}
	doc["config"] = cfg
	return writeStackDoc(path, doc)
}

// secretStrings lists every string form of the secret config values, so they
// can be scrubbed from messages: the value itself (JSON for structured values),
// each leaf of a structured value, and each line of a multi-line value.
func secretStrings(values []ConfigValue) []string {
	var out []string
	for _, cv := range values {
		if !cv.Secret {
			continue
		}
		v, err := normalizeValue(cv.Value)
		if err != nil || v == nil {
			continue
		}
		switch t := v.(type) {
		case bool:
			// Nothing to scrub: hiding every "true" would hide nothing.
		case map[string]any, []any:
			if enc, err := json.Marshal(t); err == nil {
				out = append(out, string(enc))
			}
			out = append(out, leafStrings(t)...)
		default:
			out = append(out, scalarText(t))
		}
	}
	var lines []string
	for _, s := range out {
		if strings.Contains(s, "\n") {
			for _, l := range strings.Split(s, "\n") {
				if l = strings.TrimSpace(l); len(l) >= 8 {
					lines = append(lines, l)
				}
			}
		}
	}
	return append(out, lines...)
}

func leafStrings(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case int64, float64:
		return []string{scalarText(t)}
	case map[string]any:
		var out []string
		for _, e := range t {
			out = append(out, leafStrings(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range t {
			out = append(out, leafStrings(e)...)
		}
		return out
	default:
		return nil
	}
}
