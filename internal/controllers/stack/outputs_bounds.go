package stack

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// A program decides how large its outputs are; the Stack's status must stay
// small whatever they are (every status patch fails once the object passes
// etcd's limit), and the outputs objects have a hard limit of their own.

// maxObjectData is what a Secret or a ConfigMap may hold: the API server
// refuses more than 1 MiB of data, keys and values counted.
const maxObjectData = corev1.MaxSecretSize

// statusOutputs is what status.outputs shows: compact JSON, secrets as
// "[secret]", bounded. At most MaxStatusOutputs outputs are listed (by name;
// the number left out is returned); a value over MaxStatusOutputValue, or one
// that no longer fits in MaxStatusOutputsBytes (smallest values first), is
// replaced by a note saying its size and where to read it.
func statusOutputs(outputs map[string]runner.Output, target *v1alpha1.OutputsTarget) (map[string]string, int64) {
	if len(outputs) == 0 {
		return nil, 0
	}
	keys := slices.Sorted(maps.Keys(outputs))
	var omitted int64
	if len(keys) > v1alpha1.MaxStatusOutputs {
		omitted = int64(len(keys) - v1alpha1.MaxStatusOutputs)
		keys = keys[:v1alpha1.MaxStatusOutputs]
	}
	out := make(map[string]string, len(keys))
	type value struct{ key, json string }
	var values []value
	for _, k := range keys {
		o := outputs[k]
		if o.Secret {
			out[k] = v1alpha1.SecretOutputValue
			continue
		}
		raw, err := json.Marshal(o.Value)
		if err != nil {
			raw = []byte(fmt.Sprintf("%q", fmt.Sprint(o.Value)))
		}
		values = append(values, value{k, string(raw)})
	}
	slices.SortFunc(values, func(a, b value) int {
		return cmp.Or(cmp.Compare(len(a.json), len(b.json)), cmp.Compare(a.key, b.key))
	})
	budget := v1alpha1.MaxStatusOutputsBytes
	for _, v := range values {
		if len(v.json) <= v1alpha1.MaxStatusOutputValue && len(v.json) <= budget {
			out[v.key] = v.json
			budget -= len(v.json)
			continue
		}
		out[v.key] = omittedNote(len(v.json), target)
	}
	return out, omitted
}

// omittedNote stands in status.outputs for a value too large to show.
func omittedNote(size int, target *v1alpha1.OutputsTarget) string {
	where := "not published: spec.outputs is not set"
	switch {
	case target != nil && target.SecretName != "":
		where = "see Secret " + target.SecretName
	case target != nil && target.ConfigMapName != "":
		where = "see ConfigMap " + target.ConfigMapName
	}
	return fmt.Sprintf("%s%s; %s]", v1alpha1.OmittedOutputPrefix, humanSize(size), where)
}

// fitsInObject is an OutputsTooLarge error when data is more than a Secret or
// ConfigMap holds. It names the largest outputs and their sizes, never a value.
func fitsInObject(kind, name string, data map[string]string) error {
	total := 0
	type entry struct {
		key  string
		size int
	}
	entries := make([]entry, 0, len(data))
	for k, v := range data {
		total += len(k) + len(v)
		entries = append(entries, entry{k, len(k) + len(v)})
	}
	if total <= maxObjectData {
		return nil
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.size, a.size), cmp.Compare(a.key, b.key))
	})
	var largest []string
	for _, e := range entries[:min(len(entries), 5)] {
		largest = append(largest, fmt.Sprintf("%s (%s)", e.key, humanSize(e.size)))
	}
	return transient(v1alpha1.OutputsTooLargeReason, fmt.Errorf(
		"the outputs do not fit in %s %s: %s of data, over the %s a %s can hold (largest: %s); export smaller outputs from the program (a reference to large data, not the data itself)",
		kind, name, humanSize(total), humanSize(maxObjectData), kind, strings.Join(largest, ", ")))
}

// humanSize writes a byte count the way people read it: 512 B, 1.5 KiB, 2.3 MiB.
func humanSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1024)) + " KiB"
	}
	return trimZero(fmt.Sprintf("%.1f", float64(n)/(1024*1024))) + " MiB"
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }
