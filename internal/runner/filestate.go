package runner

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stackpilot/stackpilot/internal/atomicfile"
)

// fileStack is where a stack of a file:// backend keeps its state, read and
// written the way the pulumi CLI's DIY backend does (pkg/backend/diy: store.go,
// stack_tags.go): the runner reads the checkpoint and the tags itself instead of
// starting the CLI to ask.
//
// Layout: <backend>/.pulumi/stacks/<project>/<stack>.json for project-scoped
// backends (.pulumi/meta.yaml version 1, what every new backend gets) and
// .pulumi/stacks/<stack>.json for legacy ones; ".json.gz" when the backend
// gzips its state; the tags in "<same base>.pulumi-tags".
type fileStack struct {
	base string // the path without extension
}

// openFileStack locates stackName of project in the backend directory dir. The
// project is the stack name's own when it is "org/project/stack".
func openFileStack(dir, project, stackName string) fileStack {
	parts := strings.Split(stackName, "/")
	short := parts[len(parts)-1]
	if len(parts) == 3 {
		project = parts[1]
	}
	stacks := filepath.Join(dir, ".pulumi", "stacks")
	if legacyLayout(dir) {
		return fileStack{base: filepath.Join(stacks, short)}
	}
	return fileStack{base: filepath.Join(stacks, project, short)}
}

// legacyLayout says whether the backend keeps stacks without project folders:
// a backend with stacks but no meta.yaml, or one whose meta.yaml says version 0.
func legacyLayout(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, ".pulumi", "meta.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		entries, err := os.ReadDir(filepath.Join(dir, ".pulumi", "stacks"))
		if err != nil {
			return false // a new backend: the CLI creates it project-scoped
		}
		for _, e := range entries {
			if !e.IsDir() {
				return true
			}
		}
		return false
	}
	var meta struct {
		Version int `yaml:"version"`
	}
	if err != nil || yaml.Unmarshal(data, &meta) != nil {
		return false
	}
	return meta.Version == 0
}

// checkpointPath returns the existing state file, or "" when the stack does not exist.
func (s fileStack) checkpointPath() string {
	for _, p := range []string{s.base + ".json", s.base + ".json.gz"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func (s fileStack) exists() bool { return s.checkpointPath() != "" }

// checkpoint is the part of a stack's state file the runner reads.
type checkpoint struct {
	Checkpoint struct {
		Latest *deployment `json:"latest"`
	} `json:"checkpoint"`
}

// deployment is the part of a deployment (a checkpoint's latest, or `pulumi
// stack export`) the runner reads: the secrets provider and the root stack's outputs.
type deployment struct {
	SecretsProviders *struct {
		Type  string          `json:"type"`
		State json.RawMessage `json:"state"`
	} `json:"secrets_providers"`
	Resources []struct {
		URN     string                     `json:"urn"`
		Type    string                     `json:"type"`
		Parent  string                     `json:"parent"`
		Outputs map[string]json.RawMessage `json:"outputs"`
		// Inputs are what the policy analyzer compares a registration
		// with (policy.go).
		Inputs map[string]json.RawMessage `json:"inputs"`
	} `json:"resources"`
}

// readCheckpoint reads the stack's latest deployment; nil when the stack has
// never been updated.
func (s fileStack) readCheckpoint() (*deployment, error) {
	path := s.checkpointPath()
	if path == "" {
		return nil, fmt.Errorf("no state file %s.json", s.base)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("%s is not a Pulumi checkpoint: %w", path, err)
	}
	return cp.Checkpoint.Latest, nil
}

// passphraseSalt is the passphrase secrets manager's state recorded in the
// deployment, "" when the stack uses another secrets provider or none yet.
func (d *deployment) passphraseSalt() string {
	if d == nil || d.SecretsProviders == nil || d.SecretsProviders.Type != "passphrase" {
		return ""
	}
	var st struct {
		Salt string `json:"salt"`
	}
	if json.Unmarshal(d.SecretsProviders.State, &st) != nil {
		return ""
	}
	return st.Salt
}

// stackTagsFile is the DIY backend's tags file.
type stackTagsFile struct {
	Version int               `json:"version"`
	Tags    map[string]string `json:"tags"`
}

func (s fileStack) tagsPath() string { return s.base + ".pulumi-tags" }

// readTags reads the stack's tags; no file is no tags.
func (s fileStack) readTags() (map[string]string, error) {
	data, err := os.ReadFile(s.tagsPath())
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	var f stackTagsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", s.tagsPath(), err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("%s: tags file version %d, this runner reads version 1", s.tagsPath(), f.Version)
	}
	if f.Tags == nil {
		f.Tags = map[string]string{}
	}
	return f.Tags, nil
}

// setTag sets one tag, keeping the others, with a write-then-rename so that a
// reader (the CLI, another runner) never sees half a file.
func (s fileStack) setTag(name, value string) error {
	tags, err := s.readTags()
	if err != nil {
		return err
	}
	tags[name] = value
	data, err := json.MarshalIndent(stackTagsFile{Version: 1, Tags: tags}, "", "    ")
	if err != nil {
		return err
	}
	return atomicfile.Write(s.tagsPath(), data, 0o644)
}
