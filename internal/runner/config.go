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

	"gopkg.in/yaml.v3"

	"github.com/stackpilot/stackpilot/internal/atomicfile"
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

// mergeConfig puts the plain config values into a stack settings document.
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
func mergeConfig(doc map[string]any, pc preparedConfig) {
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
	// Replace, never write through: the work dir's files may be hard links
	// into the artifact cache.
	return atomicfile.Write(path, out, 0o600)
}

// applyConfig writes the whole config of the operation into the stack file.
//
// The stack's passphrase salt goes in too when only the state has it: the CLI
// then builds its secrets manager from the file, not from the state it falls
// back to, which costs it ~0.05 s of CPU per operation (measured with the
// pinned CLI). Secret values are encrypted here, in process, with the
// stack's passphrase crypter (secretconfig.go): no secret value is ever on a
// command line, where any user of the host reads it in /proc/<pid>/cmdline.
func (o *operation) applyConfig(ctx context.Context, pc preparedConfig) error {
	path := stackFileName(o.spec.WorkDir, o.spec.StackName)
	doc, err := readStackDoc(path)
	if err != nil {
		return err
	}
	mergeConfig(doc, pc)
	salt, err := o.passphraseSalt(doc)
	if err != nil {
		return err
	}
	if salt != "" {
		doc["encryptionsalt"] = salt
	}
	if len(pc.secrets) == 0 {
		return writeStackDoc(path, doc)
	}
	return o.applySecrets(ctx, path, doc, planSecrets(pc.secrets))
}

// passphraseSalt is the stack's passphrase salt: the stack file's (committed,
// or written by `stack init`), else the one the state of a file:// backend
// records. It is "" when the stack has another secrets provider or no salt is
// known without asking the CLI.
func (o *operation) passphraseSalt(doc map[string]any) (string, error) {
	if !o.mayUsePassphrase(doc) {
		return "", nil
	}
	if salt, _ := doc["encryptionsalt"].(string); salt != "" || o.file == nil || !o.file.exists() {
		return salt, nil
	}
	d, err := o.file.readCheckpoint()
	if err != nil {
		return "", err
	}
	return d.passphraseSalt(), nil
}

// placeEncryptedSecrets encrypts the planned secret values into doc's config
// in the form `pulumi config set --secret [--path]` gives them.
func placeEncryptedSecrets(doc map[string]any, plan secretPlan, crypt *passphraseCrypter) error {
	cfg := stackConfig(doc)
	plan.leaves = map[string]string{}
	for k, v := range plan.set {
		ct, err := crypt.encrypt(v)
		if err != nil {
			if errors.Is(err, ErrIncorrectPassphrase) {
				return fmt.Errorf("cannot encrypt config %q: %w", k, err)
			}
			return err
		}
		if strings.HasPrefix(k, secretNamespace+":") {
			plan.leaves[k] = ct
			continue
		}
		cfg[k] = map[string]any{"secure": ct}
	}
	for k, v := range plan.structured {
		filled, err := plan.fill(v)
		if err != nil {
			return err
		}
		cfg[k] = filled
	}
	doc["config"] = cfg
	return nil
}
