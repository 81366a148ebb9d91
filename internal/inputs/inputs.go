package inputs

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/serror"
)

// Inputs is everything besides the program that an operation depends on,
// resolved from the spec and the Secrets and ConfigMaps it references.
type Inputs struct {
	Backend string
	// Executor is where the operation runs: v1alpha1.ExecutorLocal or
	// ExecutorJob (spec.runner.executor, else the controller's default).
	// Not kept with the inputs (Snapshots): a rollback runs where the
	// Stack runs now.
	Executor string
	Config   []runner.ConfigValue
	Env      map[string]string
	// ServiceAccount is the ServiceAccount of the Stack's namespace that the
	// program acts as; empty means the controller's own identity.
	ServiceAccount string
	// Digest identifies these inputs; it changes when any of them changes.
	Digest string
	// Secrets are the values that must never be shown (scrubbed from messages).
	Secrets []string
}

// configKeyPattern is a Pulumi config key: an optional namespace, then a name.
var configKeyPattern = regexp.MustCompile(`^([A-Za-z0-9_.-]+:)?[A-Za-z0-9_./-]+$`)

// Resolver reads the objects a Stack references.
type Resolver struct {
	Client                  client.Reader
	DefaultBackend          string // may hold {namespace}
	DefaultPassphraseSecret string
	DefaultServiceAccount   string
	// DigestKey keys the HMAC of Digest.
	DigestKey KeySource
	// AllowCrossNamespace lets configFrom stackOutputs read a Stack of
	// another namespace (--allow-cross-namespace-refs).
	AllowCrossNamespace bool
	// DefaultExecutor is where Stacks without spec.runner.executor run
	// (--default-executor; "" is Local). Job Stacks are checked for what a
	// runner Pod needs (checkJobStack).
	DefaultExecutor string
	// LocalNamespace is the controller's own namespace: where the default
	// executor is Job, only its Stacks may ask for Local, unless AllowLocal
	// (--allow-local-executor) lets every Stack (checkLocalStack).
	LocalNamespace string
	AllowLocal     bool
}

// KeySource gives the key of the inputs digest (*DigestKey).
type KeySource interface {
	Get(ctx context.Context) ([]byte, error)
}

// Resolve builds the inputs of stack. Missing references are a WaitingError
// (they may be created soon); malformed ones are a StallingError.
func (r *Resolver) Resolve(ctx context.Context, stack *v1alpha1.Stack) (*Inputs, error) {
	in := &Inputs{Env: map[string]string{}}
	spec := &stack.Spec

	in.Backend = spec.Backend
	if in.Backend == "" {
		in.Backend = namespacedBackend(r.DefaultBackend, stack.Namespace, stack.Name)
	}
	if in.Backend == "" {
		return nil, serror.Stalling(v1alpha1.InvalidSpecReason, "spec.backend is empty and the controller has no --default-backend")
	}
	in.Executor = r.Executor(stack)
	if err := r.checkJobStack(stack, in.Backend, spec.Backend == ""); err != nil {
		return nil, err
	}

	values := map[string]runner.ConfigValue{}
	for i, src := range spec.ConfigFrom {
		if src.StackOutputs != nil {
			if len(src.Keys) > 0 {
				return nil, serror.Stalling(v1alpha1.InvalidSpecReason,
					"spec.configFrom[%d]: keys is for configMapRef and secretRef; choose the outputs with stackOutputs.keys", i)
			}
			vals, err := r.stackOutputs(ctx, stack, fmt.Sprintf("spec.configFrom[%d].stackOutputs", i), src.StackOutputs)
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				values[v.Key] = v
				if v.Secret {
					in.Secrets = append(in.Secrets, secretText(v.Value))
				}
			}
			continue
		}
		data, secret, err := r.readRef(ctx, stack.Namespace, fmt.Sprintf("spec.configFrom[%d]", i), src.ConfigMapRef, src.SecretRef)
		if err != nil {
			return nil, err
		}
		keys := src.Keys
		if len(keys) == 0 {
			keys = sortedKeys(data)
		}
		for _, k := range keys {
			v, ok := data[k]
			if !ok {
				if data == nil { // optional and absent
					continue
				}
				return nil, serror.Waiting(v1alpha1.InputsNotFoundReason, "spec.configFrom[%d]: key %q not found in %s", i, k, refName(src.ConfigMapRef, src.SecretRef))
			}
			if !configKeyPattern.MatchString(k) {
				return nil, serror.Stalling(v1alpha1.InvalidSpecReason, "spec.configFrom[%d]: key %q is not a valid Pulumi config key (want [namespace:]name)", i, k)
			}
			values[k] = runner.ConfigValue{Key: k, Value: v, Secret: secret}
			if secret {
				in.Secrets = append(in.Secrets, v)
			}
		}
	}
	for k, raw := range spec.Config {
		if !configKeyPattern.MatchString(k) {
			return nil, serror.Stalling(v1alpha1.InvalidSpecReason, "spec.config: key %q is not a valid Pulumi config key (want [namespace:]name)", k)
		}
		var v any
		if err := json.Unmarshal(raw.Raw, &v); err != nil {
			return nil, serror.Stalling(v1alpha1.InvalidSpecReason, "spec.config.%s: %v", k, err)
		}
		values[k] = runner.ConfigValue{Key: k, Value: v}
	}
	for _, k := range sortedKeys(values) {
		in.Config = append(in.Config, values[k])
	}

	for i, src := range spec.EnvFrom {
		data, secret, err := r.readRef(ctx, stack.Namespace, fmt.Sprintf("spec.envFrom[%d]", i), src.ConfigMapRef, src.SecretRef)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			in.Env[src.Prefix+k] = v
			if secret {
				in.Secrets = append(in.Secrets, v)
			}
		}
	}
	if ref := spec.BackendSecretRef; ref != nil {
		data, err := r.secretData(ctx, stack.Namespace, ref.Name, "spec.backendSecretRef", false)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			in.Env[k] = v
			in.Secrets = append(in.Secrets, v)
		}
	}
	if err := r.resolvePassphrase(ctx, stack, in); err != nil {
		return nil, err
	}
	if err := r.resolveServiceAccount(ctx, stack, in); err != nil {
		return nil, err
	}
	in.Secrets = slices.DeleteFunc(in.Secrets, func(s string) bool { return s == "" })
	if r.DigestKey == nil {
		return nil, serror.Transient(v1alpha1.DigestKeyUnavailableReason, fmt.Errorf("the controller has no inputs digest key"))
	}
	key, err := r.DigestKey.Get(ctx)
	if err != nil {
		return nil, err
	}
	in.Digest = digestInputs(key, stack, in)
	return in, nil
}

// resolvePassphrase sets PULUMI_CONFIG_PASSPHRASE from the Secret the spec or the
// controller names. Pulumi Cloud backends need none.
func (r *Resolver) resolvePassphrase(ctx context.Context, stack *v1alpha1.Stack, in *Inputs) error {
	field := "spec.secretsProvider.passphraseSecretRef"
	ref := &v1alpha1.SecretKeyRef{}
	switch {
	case stack.Spec.SecretsProvider != nil && stack.Spec.SecretsProvider.PassphraseSecretRef != nil:
		ref = stack.Spec.SecretsProvider.PassphraseSecretRef
	case r.DefaultPassphraseSecret != "":
		ref.Name = r.DefaultPassphraseSecret
		field = "the controller's --default-passphrase-secret"
	case isCloudBackend(in.Backend):
		return nil
	default:
		return serror.Stalling(v1alpha1.InvalidSpecReason,
			"spec.secretsProvider.passphraseSecretRef is required for backend %s (or start the controller with --default-passphrase-secret)", redactURL(in.Backend))
	}
	data, err := r.secretData(ctx, stack.Namespace, ref.Name, field, false)
	if err != nil {
		return err
	}
	pass, ok := data[ref.GetKey()]
	if !ok {
		return serror.Waiting(v1alpha1.InputsNotFoundReason, "%s: Secret %s has no key %q", field, ref.Name, ref.GetKey())
	}
	in.Env["PULUMI_CONFIG_PASSPHRASE"] = pass
	in.Secrets = append(in.Secrets, pass)
	return nil
}

// readRef reads exactly one of a ConfigMap or a Secret; data is nil when the
// object is optional and absent. secret tells which kind it was.
func (r *Resolver) readRef(ctx context.Context, ns, field string, cm, sec *v1alpha1.OptionalObjectReference) (map[string]string, bool, error) {
	switch {
	case cm != nil && sec == nil:
		var obj corev1.ConfigMap
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cm.Name}, &obj)
		if apierrors.IsNotFound(err) {
			if cm.Optional {
				return nil, false, nil
			}
			return nil, false, serror.Waiting(v1alpha1.InputsNotFoundReason, "%s: ConfigMap %s not found", field, cm.Name)
		}
		if err != nil {
			return nil, false, serror.Transient(v1alpha1.InputsNotFoundReason, fmt.Errorf("%s: read ConfigMap %s: %w", field, cm.Name, err))
		}
		data := map[string]string{}
		for k, v := range obj.Data {
			data[k] = v
		}
		for k, v := range obj.BinaryData {
			data[k] = string(v)
		}
		return data, false, nil
	case sec != nil && cm == nil:
		data, err := r.secretData(ctx, ns, sec.Name, field, sec.Optional)
		return data, true, err
	}
	return nil, false, serror.Stalling(v1alpha1.InvalidSpecReason, "%s: set exactly one of configMapRef and secretRef", field)
}

func (r *Resolver) secretData(ctx context.Context, ns, name, field string, optional bool) (map[string]string, error) {
	var obj corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &obj)
	if apierrors.IsNotFound(err) {
		if optional {
			return nil, nil
		}
		return nil, serror.Waiting(v1alpha1.InputsNotFoundReason, "%s: Secret %s not found", field, name)
	}
	if err != nil {
		return nil, serror.Transient(v1alpha1.InputsNotFoundReason, fmt.Errorf("%s: read Secret %s: %w", field, name, err))
	}
	data := map[string]string{}
	for k, v := range obj.Data {
		data[k] = string(v)
	}
	return data, nil
}

// digestInputs hashes what decides the result of an operation besides the
// program: the spec fields the runner uses, the resolved values and the identity
// the program acts as. Values from Secrets enter only through this HMAC, keyed
// with the controller's secret key: the digest is shown to anyone who may read
// the Stack, and an unkeyed hash would let them test guesses of a weak
// passphrase offline.
func digestInputs(key []byte, stack *v1alpha1.Stack, in *Inputs) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(digestDocument(stack, in))
	return digestPrefix + hex.EncodeToString(mac.Sum(nil))
}

// digestDocument is the canonical JSON of what the digest covers.
func digestDocument(stack *v1alpha1.Stack, in *Inputs) []byte {
	envKeys := sortedKeys(in.Env)
	env := make([][2]string, 0, len(envKeys))
	for _, k := range envKeys {
		env = append(env, [2]string{k, in.Env[k]})
	}
	doc := struct {
		Source    v1alpha1.StackSource `json:"source"`
		StackName string               `json:"stackName"`
		Backend   string               `json:"backend"`
		Config    []runner.ConfigValue `json:"config"`
		Env       [][2]string          `json:"env"`
		Refresh   bool                 `json:"refresh"`
		Targets   []string             `json:"targets"`
		// A change of identity is a change of inputs: the same program may be
		// refused, or reach other objects, as another ServiceAccount.
		ServiceAccount string `json:"serviceAccount"`
	}{stack.Spec.Source, stack.GetStackName(), in.Backend, in.Config, env, stack.Spec.Refresh, stack.Spec.Targets, in.ServiceAccount}
	raw, _ := json.Marshal(doc)
	return raw
}

// digestPrefix names the digest's algorithm in status.inputsDigest.
const digestPrefix = "hmac-sha256:"

// namespacedBackend gives each namespace its own state under the default backend,
// so two Stacks with the same stackName in different namespaces never share state.
// {name}, when the template has it (beside {namespace}: CheckDefaultBackend),
// gives each Stack a directory of its own: Pulumi's file:// backend lists the
// whole directory of a project's stacks in every operation, so an up there
// costs more the more stacks share it (docs/guide/operations.md, Fleets).
func namespacedBackend(tmpl, ns, name string) string {
	if tmpl == "" {
		return ""
	}
	if strings.Contains(tmpl, "{namespace}") {
		return strings.ReplaceAll(strings.ReplaceAll(tmpl, "{namespace}", ns), "{name}", name)
	}
	if isCloudBackend(tmpl) {
		return tmpl // Pulumi Cloud keeps stacks apart by organization and project
	}
	return strings.TrimSuffix(tmpl, "/") + "/" + ns
}

// CheckDefaultBackend refuses a --default-backend template with {name} but
// not {namespace}: two Stacks of one name in two namespaces would share a
// directory, and their Pulumi stacks (named after the Stacks) the state.
func CheckDefaultBackend(tmpl string) error {
	if strings.Contains(tmpl, "{name}") && !strings.Contains(tmpl, "{namespace}") {
		return fmt.Errorf("--default-backend %q has {name} without {namespace}: Stacks of the same name in two namespaces would share their state; write it as .../{namespace}/{name}", tmpl)
	}
	return nil
}

func isCloudBackend(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")
}

func refName(cm, sec *v1alpha1.OptionalObjectReference) string {
	if cm != nil {
		return "ConfigMap " + cm.Name
	}
	return "Secret " + sec.Name
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
