package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"gopkg.in/yaml.v3"
)

// ConfigError says that the operation's config cannot be used as given: the
// person who wrote the Stack has to fix it.
type ConfigError struct {
	Key    string
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return "config: " + e.Reason
	}
	return fmt.Sprintf("config %q: %s", e.Key, e.Reason)
}

// projectFileNames are the names Pulumi accepts for the project file, in the
// order it looks for them.
var projectFileNames = []string{"Pulumi.yaml", "Pulumi.yml"}

// ProjectName reads the project name from the Pulumi.yaml (or Pulumi.yml) in dir.
func ProjectName(dir string) (string, error) {
	for _, name := range projectFileNames {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		var project struct {
			Name string `yaml:"name"`
		}
		if err := yaml.Unmarshal(data, &project); err != nil {
			return "", &ConfigError{Reason: fmt.Sprintf("%s is not valid YAML: %v", name, err)}
		}
		if project.Name == "" {
			return "", &ConfigError{Reason: name + " has no name"}
		}
		return project.Name, nil
	}
	return "", &ConfigError{Reason: "no Pulumi.yaml in the program directory"}
}

// qualifyKey puts a key without a namespace into the project's namespace, the
// way `pulumi config set` does.
func qualifyKey(project, key string) string {
	if strings.Contains(key, ":") {
		return key
	}
	return project + ":" + key
}

// stackFileName is the stack settings file Pulumi reads for stackName. Only the
// last segment of "org/project/stack" names the file, as in the CLI.
func stackFileName(dir, stackName string) string {
	short := stackName
	if i := strings.LastIndex(short, "/"); i >= 0 {
		short = short[i+1:]
	}
	// Keep an existing .yml file rather than shadowing it with a second one.
	yml := filepath.Join(dir, "Pulumi."+short+".yml")
	if _, err := os.Stat(yml); err == nil {
		return yml
	}
	return filepath.Join(dir, "Pulumi."+short+".yaml")
}

// preparedConfig is the spec's config split the way it reaches Pulumi.
type preparedConfig struct {
	plain   map[string]any // written into the stack file, structured as YAML
	secrets map[string]any // set through the CLI, which encrypts them
}

// prepareConfig qualifies keys and normalizes values (JSON numbers become Go
// numbers so YAML writes them as numbers, not strings).
func prepareConfig(project string, values []ConfigValue) (preparedConfig, error) {
	pc := preparedConfig{plain: map[string]any{}, secrets: map[string]any{}}
	for _, cv := range values {
		if cv.Key == "" || strings.HasPrefix(cv.Key, ":") || strings.HasSuffix(cv.Key, ":") {
			return pc, &ConfigError{Key: cv.Key, Reason: "a key needs a name (and an optional namespace: \"ns:name\")"}
		}
		v, err := normalizeValue(cv.Value)
		if err != nil {
			return pc, &ConfigError{Key: cv.Key, Reason: err.Error()}
		}
		if v == nil {
			return pc, &ConfigError{Key: cv.Key, Reason: "the value is null"}
		}
		if hasSecureMap(v) {
			return pc, &ConfigError{Key: cv.Key,
				Reason: `Pulumi reserves objects whose only key is "secure" for encrypted values`}
		}
		key := qualifyKey(project, cv.Key)
		delete(pc.plain, key)
		delete(pc.secrets, key)
		if cv.Secret {
			pc.secrets[key] = v
		} else {
			pc.plain[key] = v
		}
	}
	return pc, nil
}

// normalizeValue turns any JSON-compatible value into plain Go values
// (map[string]any, []any, string, bool, int64, float64) by a JSON round trip.
func normalizeValue(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return convertNumbers(out), nil
}

// hasSecureMap finds a {"secure": "..."} object, which Pulumi would take for a
// ciphertext.
func hasSecureMap(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t["secure"].(string); ok && len(t) == 1 {
			return true
		}
		for _, e := range t {
			if hasSecureMap(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasSecureMap(e) {
				return true
			}
		}
	}
	return false
}

func convertNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = convertNumbers(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = convertNumbers(e)
		}
		return t
	default:
		return v
	}
}

// writeStackFile writes the plain config values into the stack settings file.
//
// Why write the file rather than call `pulumi config set`: the stack file holds
// objects and arrays natively, so structured values reach the program as
// structured config in one write, without a CLI call per key.
//
// Everything else in an existing file is kept: the secrets provider settings
// (encryptionsalt, secretsprovider, encryptedkey) and config committed with the
// program. Spec keys win over committed keys; keys about to be set as secrets
// are removed so that a committed plaintext value cannot shadow them. The work
// dir is private to one operation, so nothing here survives from an earlier run.
func writeStackFile(path string, pc preparedConfig) error {
	doc, err := readStackDoc(path)
	if err != nil {
		return err
	}
	cfg := stackConfig(doc)
	for k := range pc.secrets {
		delete(cfg, k)
	}
	for k, v := range pc.plain {
		cfg[k] = v
	}
	if len(cfg) > 0 {
		doc["config"] = cfg
	} else {
		delete(doc, "config")
	}
	return writeStackDoc(path, doc)
}

// readStackDoc reads a stack settings file; a missing file is an empty one.
func readStackDoc(path string) (map[string]any, error) {
	doc := map[string]any{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &ConfigError{Reason: fmt.Sprintf("%s is not valid YAML: %v", filepath.Base(path), err)}
	}
	if doc == nil {
		doc = map[string]any{}
	}
	return doc, nil
}

func stackConfig(doc map[string]any) map[string]any {
	if cfg, ok := doc["config"].(map[string]any); ok {
		return cfg
	}
	return map[string]any{}
}

func writeStackDoc(path string, doc map[string]any) error {
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// applyConfig writes the whole config of the operation for the stack: plain
// values into the stack file, then secrets through the CLI, which encrypts them
// with the stack's secrets provider.
func applyConfig(ctx context.Context, stack auto.Stack, spec Spec, pc preparedConfig) error {
	path := stackFileName(spec.WorkDir, spec.StackName)
	if err := writeStackFile(path, pc); err != nil {
		return err
	}
	if len(pc.secrets) == 0 {
		return nil
	}
	plan := planSecrets(pc.secrets)
	// Path false: a key is a key, even with dots or brackets in it.
	if err := stack.SetAllConfigWithOptions(ctx, plan.set, &auto.ConfigOptions{Path: false}); err != nil {
		return err
	}
	if len(plan.structured) == 0 {
		return nil
	}
	return placeSecretLeaves(path, plan)
}
