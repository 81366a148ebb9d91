package inputs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/serror"
)

// stackOutputs turns the outputs another Stack published into config values
// (configFrom[].stackOutputs). They are read from the upstream's outputs
// Secret, where every output is, secret ones too, as the publisher wrote
// them (the controller's step_outputs.go): strings as they are, other values as JSON text,
// with annotations naming the JSON ones and the secret ones. Each value goes
// back to what Pulumi gave: a number stays a number, a secret output becomes
// secret config and is scrubbed from every message.
func (r *Resolver) stackOutputs(ctx context.Context, stack *v1alpha1.Stack, field string, ref *v1alpha1.StackOutputsReference) ([]runner.ConfigValue, error) {
	ns, name := v1alpha1.DependencyReference{Name: ref.Name, Namespace: ref.Namespace}.Namespaced(stack.Namespace)
	upName := UpstreamName(stack.Namespace, ns, name)
	if ns != stack.Namespace && !r.AllowCrossNamespace {
		return nil, serror.Stalling(v1alpha1.CrossNamespaceRefNotAllowedReason,
			"%s: Stack %s is in another namespace; the controller refuses cross-namespace references unless it runs with --allow-cross-namespace-refs", field, upName)
	}
	var up v1alpha1.Stack
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &up)
	if apierrors.IsNotFound(err) {
		return nil, serror.Waiting(v1alpha1.InputsNotFoundReason, "%s: Stack %s not found", field, upName)
	}
	if err != nil {
		return nil, serror.Transient(v1alpha1.InputsNotFoundReason, fmt.Errorf("%s: read Stack %s: %w", field, upName, err))
	}
	if up.Spec.Outputs == nil || up.Spec.Outputs.SecretName == "" {
		return nil, serror.Waiting(v1alpha1.InputsNotFoundReason,
			"%s: Stack %s publishes no outputs Secret: set spec.outputs.secretName on Stack %s", field, upName, upName)
	}
	secName := up.Spec.Outputs.SecretName
	var sec corev1.Secret
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secName}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, serror.Waiting(v1alpha1.InputsNotFoundReason, "%s: Stack %s has not published its outputs Secret %s yet", field, upName, secName)
	}
	if err != nil {
		return nil, serror.Transient(v1alpha1.InputsNotFoundReason, fmt.Errorf("%s: read the outputs Secret %s of Stack %s: %w", field, secName, upName, err))
	}
	// Only what the upstream Stack itself published is its outputs: a
	// Secret of that name made by someone else is not.
	if owner := metav1.GetControllerOf(&sec); owner == nil || owner.UID != up.UID {
		return nil, serror.Waiting(v1alpha1.InputsNotFoundReason,
			"%s: Secret %s/%s is not controlled by Stack %s: it holds no outputs of that Stack (yet)", field, ns, secName, upName)
	}
	return outputConfigValues(field, upName, &sec, ref.Keys)
}

// outputConfigValues maps the outputs in sec to config values: every output
// under its own name when keys is empty, else the listed ones.
func outputConfigValues(field, upName string, sec *corev1.Secret, keys []v1alpha1.OutputKey) ([]runner.ConfigValue, error) {
	secretNames, annotated := sec.Annotations[v1alpha1.SecretOutputsAnnotation]
	secret := nameSet(secretNames)
	structured := nameSet(sec.Annotations[v1alpha1.JSONOutputsAnnotation])
	if len(keys) == 0 {
		for _, k := range sortedKeys(sec.Data) {
			keys = append(keys, v1alpha1.OutputKey{Output: k})
		}
	}
	values := make([]runner.ConfigValue, 0, len(keys))
	seen := map[string]string{}
	for _, k := range keys {
		raw, ok := sec.Data[k.Output]
		if !ok {
			return nil, serror.Waiting(v1alpha1.InputsNotFoundReason, "%s: Stack %s has no output %q (its outputs: %s)",
				field, upName, k.Output, strings.Join(BoundKeys(sortedKeys(sec.Data)), ", "))
		}
		as := k.As
		if as == "" {
			as = k.Output
		}
		if !configKeyPattern.MatchString(as) {
			return nil, serror.Stalling(v1alpha1.InvalidSpecReason,
				"%s: output %q of Stack %s: %q is not a valid Pulumi config key (want [namespace:]name); set keys[].as", field, k.Output, upName, as)
		}
		if prev, dup := seen[as]; dup {
			return nil, serror.Stalling(v1alpha1.InvalidSpecReason, "%s: outputs %q and %q both map to config key %q", field, prev, k.Output, as)
		}
		seen[as] = k.Output
		v := any(string(raw))
		if structured[k.Output] {
			v = decodeOutput(raw)
		}
		// Without the annotation (a Secret published by an older
		// controller) no output is known not to be secret.
		values = append(values, runner.ConfigValue{Key: as, Value: v, Secret: !annotated || secret[k.Output]})
	}
	return values, nil
}

// decodeOutput reads back an output the publisher wrote as JSON. Numbers stay
// json.Number, their exact text (as the runner reads config): a large integer
// does not lose digits through a float64.
func decodeOutput(raw []byte) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return string(raw) // not the publisher's JSON (edited by hand?): the text
	}
	return v
}

// nameSet splits an annotation's comma-separated names.
func nameSet(list string) map[string]bool {
	set := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			set[n] = true
		}
	}
	return set
}

// upstreamName names another Stack in a message: by name in the same
// namespace, as namespace/name otherwise.
func UpstreamName(ownNamespace, ns, name string) string {
	if ns == ownNamespace {
		return name
	}
	return ns + "/" + name
}

// secretText is the text of a secret config value, for scrubbing.
func secretText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(raw)
}

// BoundKeys keeps a list of keys short enough for a message.
func BoundKeys(keys []string) []string {
	if len(keys) <= 20 {
		return keys
	}
	return append(keys[:20:20], fmt.Sprintf("... %d more", len(keys)-20))
}
