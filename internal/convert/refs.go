package convert

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Stackpilot reads configuration and environment from whole ConfigMaps and
// Secrets, each data key becoming a config key or a variable; PKO maps each
// config key or variable to one key of one object. A PKO reference carries
// over when its data key is the name it gives (or, for variables, ends it);
// otherwise the warning says which key to add.

// configKeyOK is whether a Pulumi config key can also be a data key:
// "aws:region" cannot (':' is not allowed in ConfigMap and Secret keys).
func configKeyOK(k string) bool { return secretKeyPattern.MatchString(k) }

// convertConfigRefs carries spec.configRef, spec.secretsRef and the
// deprecated spec.secrets over to spec.configFrom.
func (s *stackConv) convertConfigRefs() {
	spec := &s.out.Spec
	var configRefs map[string]pkoConfigMapRef
	s.take("configRef", &configRefs)
	byMap := map[string][]string{}
	for _, k := range sortedKeys(configRefs) {
		ref := configRefs[k]
		field := fmt.Sprintf("spec.configRef[%s]", k)
		if ref.Key != k {
			s.warn(field, "left out: Stackpilot uses a ConfigMap's data keys as the config keys, and ConfigMap %s key %q is not %q; %s", ref.Name, ref.Key, k, addKeyHint("ConfigMap", ref.Name, k, "configFrom"))
			continue
		}
		byMap[ref.Name] = append(byMap[ref.Name], k)
		if ref.JSON != nil && *ref.JSON {
			s.warn(field+".json", "Stackpilot passes ConfigMap values to Pulumi as strings: the program gets the JSON text, which getObject/requireObject still parse; for a structured value Pulumi can address with --path, move it into spec.config")
		}
	}
	for _, name := range sortedKeys(byMap) {
		spec.ConfigFrom = append(spec.ConfigFrom, v1alpha1.ConfigFromSource{
			ConfigMapRef: &v1alpha1.OptionalObjectReference{Name: name}, Keys: byMap[name]})
	}

	var secretRefs map[string]pkoResourceRef
	s.take("secretsRef", &secretRefs)
	bySecret := map[string][]string{}
	for _, k := range sortedKeys(secretRefs) {
		ref := secretRefs[k]
		field := fmt.Sprintf("spec.secretsRef[%s]", k)
		switch {
		case ref.Type == refSecret && ref.Secret != nil:
			if !s.sameNamespace(field+".secret.namespace", ref.Secret.Namespace) {
				continue
			}
			if ref.Secret.Key != k {
				s.warn(field, "left out: Stackpilot uses a Secret's data keys as the config keys, and Secret %s key %q is not %q; %s", ref.Secret.Name, ref.Secret.Key, k, addKeyHint("Secret", ref.Secret.Name, k, "configFrom"))
				continue
			}
			bySecret[ref.Secret.Name] = append(bySecret[ref.Secret.Name], k)
		case ref.Type == refLiteral && ref.Literal != nil:
			s.configLiteral(field, k, ref.Literal.Value)
		default:
			s.warn(field, "%s", unreadableRef(ref))
		}
	}
	var inline map[string]string
	s.take("secrets", &inline)
	for _, k := range sortedKeys(inline) {
		s.configLiteral(fmt.Sprintf("spec.secrets[%s]", k), k, inline[k])
	}
	for _, name := range sortedKeys(bySecret) {
		spec.ConfigFrom = append(spec.ConfigFrom, v1alpha1.ConfigFromSource{
			SecretRef: &v1alpha1.OptionalObjectReference{Name: name}, Keys: bySecret[name]})
	}
	if len(s.configLiterals) > 0 {
		spec.ConfigFrom = append(spec.ConfigFrom, v1alpha1.ConfigFromSource{
			SecretRef: &v1alpha1.OptionalObjectReference{Name: configSecretName(s.meta.Name)}})
	}
}

// configLiteral keeps a literal secret config value secret: it goes to a
// generated Secret that spec.configFrom lists.
func (s *stackConv) configLiteral(field, key, value string) {
	if !configKeyOK(key) {
		s.warn(field, "left out: config key %q cannot be a Secret key (no ':' allowed there), and Stackpilot takes secret config from Secrets; set it in the program's stack settings with `pulumi config set --secret`", key)
		return
	}
	s.configLiterals[key] = value
}

// convertEnv carries spec.envRefs and the deprecated envs, envSecrets and
// accessTokenSecret over to spec.envFrom (and the passphrase Secret).
func (s *stackConv) convertEnv() {
	spec := &s.out.Spec
	var refs map[string]pkoResourceRef
	s.take("envRefs", &refs)
	type from struct{ name, prefix string }
	bySecret := map[from]bool{}
	for _, name := range sortedKeys(refs) {
		ref := refs[name]
		field := fmt.Sprintf("spec.envRefs[%s]", name)
		switch {
		case ref.Type == refSecret && ref.Secret != nil:
			if !s.sameNamespace(field+".secret.namespace", ref.Secret.Namespace) {
				continue
			}
			if name == "PULUMI_CONFIG_PASSPHRASE" {
				spec.SecretsProvider = &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: ref.Secret.Name, Key: ref.Secret.Key}}
				continue
			}
			prefix, ok := strings.CutSuffix(name, ref.Secret.Key)
			if !ok || (prefix != "" && !envPrefixPattern.MatchString(prefix)) {
				s.warn(field, "left out: Stackpilot names variables after a Secret's data keys (with an optional prefix), and Secret %s key %q does not end %s; %s", ref.Secret.Name, ref.Secret.Key, name, addKeyHint("Secret", ref.Secret.Name, name, "envFrom"))
				continue
			}
			bySecret[from{ref.Secret.Name, prefix}] = true
		case ref.Type == refLiteral && ref.Literal != nil:
			switch name {
			case "PULUMI_CONFIG_PASSPHRASE":
				spec.SecretsProvider = &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: envSecretName(s.meta.Name), Key: name}}
			case "PULUMI_BACKEND_URL":
				if spec.Backend == "" {
					spec.Backend = ref.Literal.Value
					continue
				}
			}
			s.envLiterals[name] = ref.Literal.Value
		default:
			s.warn(field, "%s", unreadableRef(ref))
		}
	}
	var froms []from
	for f := range bySecret {
		froms = append(froms, f)
	}
	sort.Slice(froms, func(i, j int) bool {
		if froms[i].name != froms[j].name {
			return froms[i].name < froms[j].name
		}
		return froms[i].prefix < froms[j].prefix
	})

	// The deprecated lists name whole objects, as envFrom does.
	var envs, envSecrets []string
	s.take("envs", &envs)
	s.take("envSecrets", &envSecrets)
	for _, name := range envs {
		spec.EnvFrom = append(spec.EnvFrom, v1alpha1.EnvFromSource{ConfigMapRef: &v1alpha1.OptionalObjectReference{Name: name}})
	}
	for _, name := range envSecrets {
		spec.EnvFrom = append(spec.EnvFrom, v1alpha1.EnvFromSource{SecretRef: &v1alpha1.OptionalObjectReference{Name: name}})
	}
	for _, f := range froms {
		spec.EnvFrom = append(spec.EnvFrom, v1alpha1.EnvFromSource{Prefix: f.prefix, SecretRef: &v1alpha1.OptionalObjectReference{Name: f.name}})
	}
	if len(s.envLiterals) > 0 {
		spec.EnvFrom = append(spec.EnvFrom, v1alpha1.EnvFromSource{SecretRef: &v1alpha1.OptionalObjectReference{Name: envSecretName(s.meta.Name)}})
	}
	var token string
	if s.take("accessTokenSecret", &token) && token != "" {
		s.warn("spec.accessTokenSecret", "left out: Stackpilot reads the Pulumi Cloud token from a variable named PULUMI_ACCESS_TOKEN; add that key to Secret %s (its accessToken value) and list the Secret in spec.envFrom or spec.backendSecretRef", token)
	}
}

// sameNamespace refuses a reference to another namespace's Secret: a Stack
// reads only its own namespace's.
func (s *stackConv) sameNamespace(field, ns string) bool {
	if ns == "" || ns == s.meta.Namespace {
		return true
	}
	s.warn(field, "left out: Stackpilot reads Secrets of the Stack's own namespace only; copy the Secret from namespace %s", ns)
	return false
}

// unreadableRef says why an Env, FS or malformed reference is left out.
func unreadableRef(ref pkoResourceRef) string {
	switch ref.Type {
	case refEnv, refFS:
		return fmt.Sprintf("left out: an %s reference reads the operator's own environment or files, which PKO v2 refuses too and Stackpilot never exposes; put the value in a Secret and list that", ref.Type)
	}
	return fmt.Sprintf("left out: a reference of type %q without its %s field is not one Stackpilot can read", ref.Type, strings.ToLower(ref.Type))
}

// addKeyHint says how to add a data key that Stackpilot would read.
func addKeyHint(kind, name, key, list string) string {
	if !configKeyOK(key) {
		return fmt.Sprintf("%q cannot be a data key (no ':'), so set it in spec.config or with `pulumi config set`", key)
	}
	return fmt.Sprintf("add key %q to %s %s and list it in spec.%s", key, kind, name, list)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
