package convert

import "encoding/json"

// The Pulumi Kubernetes Operator v2 API (pulumi.com/v1), only as far as the
// conversion reads it. Written from PKO's operator/api/pulumi/shared and
// operator/api/pulumi/v1 types; the spec is decoded key by key (see
// convertStack) so that a field this file does not know still gets a warning
// instead of vanishing.

// pkoGroup is PKO's API group; v1 is the version of its v2 release.
const pkoGroup = "pulumi.com"

// pkoMeta is the part of metadata that carries over.
type pkoMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// pkoObject is any document of the input: its spec (Stack) or program
// (Program) is kept raw for the per-kind code.
type pkoObject struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   pkoMeta         `json:"metadata"`
	Spec       json.RawMessage `json:"spec,omitempty"`
	Program    json.RawMessage `json:"program,omitempty"`
}

// pkoResourceRef is PKO's ResourceRef: a value from a Secret, a literal, an
// environment variable or a file of the operator.
type pkoResourceRef struct {
	Type       string            `json:"type"`
	Secret     *pkoSecretRef     `json:"secret,omitempty"`
	Literal    *pkoLiteral       `json:"literal,omitempty"`
	Env        *pkoNamed         `json:"env,omitempty"`
	FileSystem *pkoFileSystemRef `json:"filesystem,omitempty"`
}

const (
	refSecret  = "Secret"
	refLiteral = "Literal"
	refEnv     = "Env"
	refFS      = "FS"
)

type pkoSecretRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

type pkoLiteral struct {
	Value string `json:"value"`
}

type pkoNamed struct {
	Name string `json:"name"`
}

type pkoFileSystemRef struct {
	Path string `json:"path"`
}

// pkoConfigMapRef is PKO's ConfigMapRef (spec.configRef values).
type pkoConfigMapRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	JSON *bool  `json:"json,omitempty"`
}

// pkoGitAuth is PKO's GitAuthConfig: one of four ways to authenticate.
type pkoGitAuth struct {
	AccessToken *pkoResourceRef `json:"accessToken,omitempty"`
	SSHAuth     *struct {
		SSHPrivateKey pkoResourceRef  `json:"sshPrivateKey"`
		Password      *pkoResourceRef `json:"password,omitempty"`
	} `json:"sshAuth,omitempty"`
	BasicAuth *struct {
		UserName pkoResourceRef `json:"userName"`
		Password pkoResourceRef `json:"password"`
	} `json:"basicAuth,omitempty"`
	GitHubApp json.RawMessage `json:"githubApp,omitempty"`
}

// pkoFluxSource is PKO's FluxSource.
type pkoFluxSource struct {
	SourceRef struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Name       string `json:"name"`
	} `json:"sourceRef"`
	Dir string `json:"dir,omitempty"`
}

// pkoPrerequisite is PKO's PrerequisiteRef.
type pkoPrerequisite struct {
	Name        string `json:"name"`
	Requirement *struct {
		SucceededWithinDuration string `json:"succeededWithinDuration,omitempty"`
	} `json:"requirement,omitempty"`
}
