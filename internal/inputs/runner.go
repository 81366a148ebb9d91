package inputs

import (
	"path"
	"slices"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/serror"
)

// What a Job Stack must say before any operation: the checks the Job
// executor needs that the API server's schema cannot express. Each is a
// StallingError: nothing changes until a person edits the Stack or the
// controller's flags.

// RunnerOwnedEnv are the environment variables the runner sets in its Pod
// itself; spec.runner.podTemplate.spec.env may not name them. A literal
// passphrase in the Pod spec would also put a secret where any reader of
// the Job sees it (it comes from spec.secretsProvider, through the
// per-operation Secret), and a KUBECONFIG would lead the program away from
// the Stack's ServiceAccount.
var RunnerOwnedEnv = []string{
	"HOME",
	"KUBECONFIG",
	"PULUMI_BACKEND_URL",
	"PULUMI_CONFIG_PASSPHRASE",
	"PULUMI_CONFIG_PASSPHRASE_FILE",
	"PULUMI_HOME",
	"PULUMI_SKIP_CONFIRMATIONS",
	"PULUMI_SKIP_UPDATE_CHECK",
	"TMPDIR",
}

// RunnerOwnedEnvPrefix starts the names of the variables by which the
// runner learns its operation (its endpoint, its credential's path).
const RunnerOwnedEnvPrefix = "STACKPILOT_"

// RunnerOwnedPaths are where the runner Pod mounts its own volumes (the
// runner binary, the program, the per-operation Secret under /stackpilot; the
// writable scratch space under /tmp, as the root filesystem is read-only;
// the ServiceAccount's projected token, which a mount must not replace).
var RunnerOwnedPaths = []string{"/stackpilot", "/tmp", "/var/run/secrets/kubernetes.io/serviceaccount"}

// RunnerOwnedVolumePrefix starts the names of the runner Pod's own volumes;
// RunnerOwnedVolumes are its others.
const RunnerOwnedVolumePrefix = "stackpilot-"

var RunnerOwnedVolumes = []string{"tmp", "kube-api-access"}

// MaxRunnerVolumes bounds spec.runner.podTemplate.spec.volumes (the CRD
// keeps that list schemaless, so the API server does not).
const MaxRunnerVolumes = 50

// Executor is where stack's operations run: spec.runner.executor, else the
// controller's default.
func (r *Resolver) Executor(stack *v1alpha1.Stack) string {
	if stack.Spec.Runner != nil && stack.Spec.Runner.Executor != "" {
		return stack.Spec.Runner.Executor
	}
	if r.DefaultExecutor != "" {
		return r.DefaultExecutor
	}
	return v1alpha1.ExecutorLocal
}

// executorSource names where the executor came from, for messages.
func executorSource(stack *v1alpha1.Stack) string {
	if stack.Spec.Runner != nil && stack.Spec.Runner.Executor != "" {
		return "spec.runner.executor is " + stack.Spec.Runner.Executor
	}
	return "the controller's --default-executor is " + v1alpha1.ExecutorJob + " (spec.runner.executor is not set)"
}

// checkJobStack refuses a Job Stack that no runner Pod could run: without
// an identity of its own, with a backend on the controller's volume, or
// with a Pod template that takes what the runner owns. backend is the
// resolved one; fromDefault says it is the controller's --default-backend.
func (r *Resolver) checkJobStack(stack *v1alpha1.Stack, backend string, fromDefault bool) error {
	if r.Executor(stack) != v1alpha1.ExecutorJob {
		return r.checkLocalStack(stack)
	}
	if stack.Spec.ServiceAccountName == "" && r.DefaultServiceAccount == "" {
		return serror.Stalling(v1alpha1.RunnerServiceAccountMissingReason,
			"%s, and a Job never runs as the controller: set spec.serviceAccountName to a ServiceAccount of namespace %s "+
				"with RBAC for what the program manages, or start the controller with --default-service-account",
			executorSource(stack), stack.Namespace)
	}
	if isFileBackend(backend) {
		field := "spec.backend"
		if fromDefault {
			field = "the controller's --default-backend (spec.backend is not set)"
		}
		return serror.Stalling(v1alpha1.BackendUnreachableFromRunnerReason,
			"%s, but %s is %s, a path on the controller's volume that the runner Pod cannot reach: "+
				"use a backend both can reach: s3://, postgres://, azblob://, gs:// or Pulumi Cloud (https://api.pulumi.com)",
			executorSource(stack), field, redactURL(backend))
	}
	return checkPodTemplate(stack.Spec.Runner)
}

// checkPodTemplate refuses what the runner Pod keeps for itself.
func checkPodTemplate(runner *v1alpha1.RunnerSpec) error {
	if runner == nil || runner.PodTemplate == nil || runner.PodTemplate.Spec == nil {
		return nil
	}
	spec := runner.PodTemplate.Spec
	for i, e := range spec.Env {
		if slices.Contains(RunnerOwnedEnv, e.Name) || strings.HasPrefix(e.Name, RunnerOwnedEnvPrefix) {
			return serror.Stalling(v1alpha1.InvalidSpecReason,
				"spec.runner.podTemplate.spec.env[%d]: %s is set by the runner itself (%s and %s* are its own); "+
					"a passphrase goes in spec.secretsProvider, backend credentials in spec.backendSecretRef, other variables in spec.envFrom",
				i, e.Name, strings.Join(RunnerOwnedEnv, ", "), RunnerOwnedEnvPrefix)
		}
	}
	if len(spec.Volumes) > MaxRunnerVolumes {
		return serror.Stalling(v1alpha1.InvalidSpecReason, "spec.runner.podTemplate.spec.volumes: %d volumes, at most %d", len(spec.Volumes), MaxRunnerVolumes)
	}
	for i, v := range spec.Volumes {
		if strings.HasPrefix(v.Name, RunnerOwnedVolumePrefix) || slices.Contains(RunnerOwnedVolumes, v.Name) {
			return serror.Stalling(v1alpha1.InvalidSpecReason,
				"spec.runner.podTemplate.spec.volumes[%d]: the name %s is the runner's (%s and names starting with %s are its own volumes)",
				i, v.Name, strings.Join(RunnerOwnedVolumes, ", "), RunnerOwnedVolumePrefix)
		}
	}
	for i, m := range spec.VolumeMounts {
		if owned := runnerOwnedPath(m.MountPath); owned != "" {
			return serror.Stalling(v1alpha1.InvalidSpecReason,
				"spec.runner.podTemplate.spec.volumeMounts[%d]: mountPath %s would cover %s, which the runner mounts itself (%s are its own); mount elsewhere, such as /data",
				i, m.MountPath, owned, strings.Join(RunnerOwnedPaths, ", "))
		}
	}
	return nil
}

// runnerOwnedPath is the runner's path that a mount at p would cover or
// sit inside ("" when none): p itself, under it, or a parent of it such as
// "/". A relative path counts from the root, as a container runtime reads it.
func runnerOwnedPath(p string) string {
	p = path.Clean("/" + p)
	for _, owned := range RunnerOwnedPaths {
		if p == owned || strings.HasPrefix(p, owned+"/") || strings.HasPrefix(owned, strings.TrimSuffix(p, "/")+"/") {
			return owned
		}
	}
	return ""
}

// isFileBackend: a DIY backend on a local filesystem (file://~, file:///data/state).
func isFileBackend(u string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(u)), "file:")
}

// checkLocalStack refuses a Stack that asks for Local where the controller
// runs Jobs by default, outside the controller's own namespace, unless the
// controller allows it (--allow-local-executor). Where Job is the default,
// Stack writes are granted to every namespace's editors (the installed
// manifests aggregate them into edit): if one of them could choose Local, his
// program would run inside the controller and could act as it.
func (r *Resolver) checkLocalStack(stack *v1alpha1.Stack) error {
	if stack.Spec.Runner == nil || stack.Spec.Runner.Executor != v1alpha1.ExecutorLocal ||
		r.DefaultExecutor != v1alpha1.ExecutorJob || r.AllowLocal || (r.LocalNamespace != "" && stack.Namespace == r.LocalNamespace) {
		return nil
	}
	where := "the controller's namespace"
	if r.LocalNamespace != "" {
		where = "the controller's namespace (" + r.LocalNamespace + ")"
	}
	return serror.Stalling(v1alpha1.LocalExecutorNotAllowedReason,
		"spec.runner.executor is Local, which runs the program inside the controller, where it can act as the controller; "+
			"this controller runs Stacks as Jobs and allows Local only in %s: remove spec.runner.executor (or set it to Job), "+
			"or start the controller with --allow-local-executor if every Stack writer may act as the controller", where)
}
