package benchenv

import "fmt"

// ConfigMapProgram is a Pulumi YAML program of project name with one
// ConfigMap through the Kubernetes provider, as in test/e2e: the Stack's
// config names it (configMapName) and its namespace, and its data holds run,
// so that a new run is a one-resource update. With secret, it also takes a
// secret config value (token) and exports it, which makes the output secret.
func ConfigMapProgram(name string, run int, secret bool) string {
	cfg, out := "", ""
	if secret {
		cfg = "  token:\n    type: string\n"
		out = "  token: ${token}\n"
	}
	return fmt.Sprintf(`name: %s
runtime: yaml
config:
  namespace:
    type: string
  configMapName:
    type: string
%sresources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: ${configMapName}
        namespace: ${namespace}
      data:
        run: "%d"
    options:
      deleteBeforeReplace: true
outputs:
  configMap: ${settings.metadata.name}
%s`, name, cfg, run, out)
}
