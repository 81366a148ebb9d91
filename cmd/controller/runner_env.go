package main

import (
	"regexp"
	"strings"
)

// perOperation are the Pulumi variables the controller sets for each
// operation itself; the controller's own values must not override them.
var perOperation = map[string]bool{
	"PULUMI_BACKEND_URL": true, "PULUMI_HOME": true, "PULUMI_SKIP_CONFIRMATIONS": true,
	"PULUMI_CONFIG_PASSPHRASE": true, "PULUMI_CONFIG_PASSPHRASE_FILE": true,
}

// credentialName matches variable names that carry credentials.
var credentialName = regexp.MustCompile(`(?i)TOKEN|PASSPHRASE|SECRET|PASSWORD|CREDENTIAL|_KEY`)

// runnerBaseEnv is the runner's base environment, from the controller's:
// PATH, HOME and TMPDIR (enough to find the tools), and the controller's
// PULUMI_* settings, so that an operator configures the CLI once on the
// controller (PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION in an image whose
// plugins are bundled, PULUMI_EXPERIMENTAL, ...). Never a credential
// (PULUMI_ACCESS_TOKEN and the like) nor what each operation sets itself:
// how a program reaches its backend and cluster is chosen per Stack.
func runnerBaseEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case name == "PATH" || name == "HOME" || name == "TMPDIR":
		case strings.HasPrefix(name, "PULUMI_") && !perOperation[name] && !credentialName.MatchString(name):
		default:
			continue
		}
		env = append(env, kv)
	}
	return env
}
