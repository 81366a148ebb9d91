package runner

import (
	"context"
	"fmt"
	"strings"
)

// encryptInProcess lets the runner encrypt secret config with a passphrase
// salt. Tests turn it off to run the path of the secrets providers it
// cannot encrypt for.
var encryptInProcess = true

// applySecrets puts the planned secret values into the stack file doc (at
// path), encrypted, and writes it.
//
// With a passphrase secrets provider (every DIY backend's default) the
// runner encrypts them itself. The salt is the stack file's or a file://
// backend's state; on other backends, whose state only the CLI reads, it
// asks the CLI for the state (`pulumi stack export`: one process, as many as
// the `config set-all --secret k=v` it replaces, and no value on its command
// line). A stack that does not exist yet is created on the way and `stack
// init` writes its salt into the stack file.
//
// A provider the runner cannot encrypt for (a cloud KMS, Pulumi Cloud's
// service) gets each value through the CLI's stdin (`pulumi config set
// --secret --raw KEY`, one process per value): slower, never on a command line.
func (o *operation) applySecrets(ctx context.Context, path string, doc map[string]any, plan secretPlan) error {
	salt, _ := doc["encryptionsalt"].(string)
	if salt == "" && encryptInProcess && o.mayUsePassphrase(doc) && !isCloudBackend(o.spec.Backend) {
		var err error
		if salt, err = o.stateSalt(ctx, path); err != nil {
			return err
		}
		if salt != "" {
			doc["encryptionsalt"] = salt
		}
	}
	if salt != "" && encryptInProcess {
		if crypt, ok := newPassphraseCrypter(salt, o.spec.Env); ok {
			o.crypt = crypt
			if err := placeEncryptedSecrets(doc, plan, crypt); err != nil {
				return err
			}
			return writeStackDoc(path, doc)
		}
		// No passphrase: the CLI below says so, in its own words.
	}
	if err := writeStackDoc(path, doc); err != nil {
		return err
	}
	if err := o.withStack(ctx, func() error { return o.setSecretsFromStdin(ctx, plan) }); err != nil {
		return err
	}
	if len(plan.structured) == 0 {
		return nil
	}
	return placeSecretLeaves(path, plan)
}

// mayUsePassphrase says whether the stack may use the passphrase secrets
// provider: neither the stack file nor the spec names another.
func (o *operation) mayUsePassphrase(doc map[string]any) bool {
	if sp, _ := doc["secretsprovider"].(string); sp != "" && sp != "passphrase" {
		return false
	}
	if _, ok := doc["encryptedkey"]; ok {
		return false // a cloud KMS's data key
	}
	return o.spec.SecretsProvider == "" || o.spec.SecretsProvider == "passphrase"
}

// isCloudBackend says whether backend is Pulumi Cloud (or a self-hosted
// service), whose stacks default to its own secrets provider, not a
// passphrase: asking for the salt there would cost a process for nothing.
func isCloudBackend(backend string) bool {
	return strings.HasPrefix(backend, "https://") || strings.HasPrefix(backend, "http://")
}

// stateSalt is the passphrase salt the stack's state records, read through
// the CLI (`pulumi stack export`), or the one `stack init` wrote into the
// stack file at path when the export created the stack. "" when the stack
// uses another secrets provider.
func (o *operation) stateSalt(ctx context.Context, path string) (string, error) {
	var out string
	err := o.withStack(ctx, func() (err error) {
		out, err = o.cli.run(ctx, nil, nil, "stack", "export", "--stack", o.spec.StackName)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read the stack's secrets provider: %w", err)
	}
	if o.created {
		fresh, err := readStackDoc(path)
		if err != nil {
			return "", err
		}
		if salt, _ := fresh["encryptionsalt"].(string); salt != "" {
			return salt, nil
		}
	}
	d, err := parseExport(out)
	if err != nil {
		return "", err
	}
	return d.passphraseSalt(), nil
}

// setSecretsFromStdin sets each planned secret value with `pulumi config set
// --secret --raw KEY`, the value on the CLI's stdin (which it reads when
// stdin is not a terminal; --raw keeps its trailing newlines).
func (o *operation) setSecretsFromStdin(ctx context.Context, plan secretPlan) error {
	for _, k := range sortedKeys(plan.setKeys()) {
		_, err := o.cli.run(ctx, strings.NewReader(plan.set[k]), nil,
			"config", "set", "--stack", o.spec.StackName, "--secret", "--raw", "--", k)
		if err != nil {
			return fmt.Errorf("set secret config %q: %w", k, err)
		}
	}
	return nil
}
