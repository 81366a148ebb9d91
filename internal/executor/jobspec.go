package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Labels and annotations the Job executor puts on what it creates. The
// labels select; the annotations carry what a restarted controller needs to
// adopt a running Job (job_adopt.go).
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	LabelComponent  = "app.kubernetes.io/component"
	LabelStack      = "stackpilot.dev/stack"
	LabelOperation  = "stackpilot.dev/operation"
	managedByValue  = "stackpilot"
	componentRunner = "runner"

	AnnotationStackUID       = "stackpilot.dev/stack-uid"
	AnnotationDigest         = "stackpilot.dev/digest"
	AnnotationCredentialHash = "stackpilot.dev/credential-sha256"
	AnnotationOperationType  = "stackpilot.dev/operation-type"
	AnnotationImage          = "stackpilot.dev/runner-image"
)

// Paths inside the runner Pod. The user's image needs none of them: all are
// volumes the Pod spec brings.
const (
	podBinDir         = "/stackpilot/bin"
	podRunner         = podBinDir + "/stackpilot-runner"
	podWorkDir        = "/stackpilot/work"
	podCredentialsDir = "/stackpilot/credentials"
	podTokenDir       = "/var/run/secrets/kubernetes.io/serviceaccount"
	// CredentialKey and CAKey are the keys of the per-operation Secret.
	CredentialKey = "credential"
	CAKey         = "ca.crt"

	runnerUID = 65532 // the distroless nonroot user, also the controller image's

	runnerContainer  = "runner"
	installContainer = "install-runner"
)

// tokenTTL is how long the runner Pod's ServiceAccount token lives; the
// kubelet replaces it at 80% of that, so a long operation never holds an
// expired one, and a leaked one is worth an hour at most.
const tokenTTL = 3600

// jobParams is everything buildJob needs, resolved: no defaults are left
// for it to choose.
type jobParams struct {
	Name           string // the Job's and the Secret's base name (jobName)
	OperationID    string
	OperationType  string
	Stack          *v1alpha1.Stack
	ServiceAccount string
	Image          string // the runner container's image (the user's)
	RunnerImage    string // the image the runner binary is copied from
	Endpoint       string // https URL of the controller's runner channel
	CAPEM          []byte
	Credential     string
	Digest         string
	// ActiveDeadline bounds the Job as a whole; TerminationGrace is what
	// the runner gets, after SIGTERM, to cancel Pulumi and report.
	ActiveDeadline   time.Duration
	TerminationGrace time.Duration
	TTLAfterFinished time.Duration
}

// JobName names the Job (and so its Pod) after the Stack and the operation.
// It stays short enough for the Pod's name to fit in 63 characters. It is
// also the Pod's host name, which Pulumi writes into the stack's lock: so
// the controller knows, before the Pod exists, whose lock it will be.
func JobName(stack, operationID string) string {
	const podSuffix = 6 // "-xxxxx", what the Job controller appends
	room := 63 - podSuffix - 1 - len(operationID)
	prefix := stack
	if len(prefix) > room {
		prefix = prefix[:max(room, 0)]
	}
	// A host name is a DNS label: no dots, which a Stack's name may hold.
	prefix = strings.Trim(strings.ReplaceAll(prefix, ".", "-"), "-")
	if prefix == "" {
		return operationID
	}
	return prefix + "-" + operationID
}

// stackLabelValue is the Stack's name as a label value: a name longer than
// a label may be is cut and completed with a hash, so it stays unique.
func stackLabelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:50], "-.") + "-" + hex.EncodeToString(sum[:])[:12]
}

// CredentialSecretName is the per-operation Secret's name for a Job.
func CredentialSecretName(job string) string { return job + "-runner" }

func (p jobParams) labels() map[string]string {
	return map[string]string{
		LabelManagedBy: managedByValue,
		LabelComponent: componentRunner,
		LabelStack:     stackLabelValue(p.Stack.Name),
		LabelOperation: p.OperationID,
	}
}

// buildSecret is the per-operation Secret: the credential the runner shows
// the controller's channel and the CA it checks the channel with. The
// operation's secret inputs never go here, nor into the Pod spec: the
// runner fetches them over the channel.
func buildSecret(p jobParams) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      CredentialSecretName(p.Name),
			Namespace: p.Stack.Namespace,
			Labels:    p.labels(),
		},
		Immutable: ptr.To(true),
		Type:      corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			CredentialKey: []byte(p.Credential),
			CAKey:         p.CAPEM,
		},
	}
}

// buildJob is the operation's Job: one Pod, never restarted, that runs the
// runner as the Stack's ServiceAccount and nothing else, admitted under the
// restricted Pod Security level whatever the Stack's podTemplate adds.
func buildJob(p jobParams, credentialHash string) *batchv1.Job {
	rs := p.Stack.Spec.Runner
	if rs == nil {
		rs = &v1alpha1.RunnerSpec{}
	}
	tmpl := rs.PodTemplate
	if tmpl == nil {
		tmpl = &v1alpha1.RunnerPodTemplate{}
	}
	extra := tmpl.Spec
	if extra == nil {
		extra = &v1alpha1.RunnerPodSpec{}
	}

	podLabels := map[string]string{}
	podAnnotations := map[string]string{}
	if m := tmpl.Metadata; m != nil {
		maps.Copy(podLabels, m.Labels)
		maps.Copy(podAnnotations, m.Annotations)
	}
	maps.Copy(podLabels, p.labels()) // ours win: they select the Pod

	annotations := map[string]string{
		AnnotationStackUID:       string(p.Stack.UID),
		AnnotationDigest:         p.Digest,
		AnnotationCredentialHash: credentialHash,
		AnnotationOperationType:  p.OperationType,
		AnnotationImage:          p.Image,
	}

	pod := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		Hostname:                      p.Name, // what Pulumi writes into the lock (JobName)
		ServiceAccountName:            p.ServiceAccount,
		AutomountServiceAccountToken:  ptr.To(false), // the projected volume below instead: bounded expiry
		EnableServiceLinks:            ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To(int64(p.TerminationGrace.Seconds())),
		SecurityContext:               podSecurityContext(extra.SecurityContext),
		ImagePullSecrets:              rs.ImagePullSecrets,
		NodeSelector:                  extra.NodeSelector,
		Tolerations:                   extra.Tolerations,
		Affinity:                      extra.Affinity,
		PriorityClassName:             extra.PriorityClassName,
		InitContainers: []corev1.Container{{
			Name:  installContainer,
			Image: p.RunnerImage,
			// The runner image's entrypoint is the controller binary, whose
			// install-runner command copies itself: the image has no shell.
			Args:                     []string{"install-runner", podBinDir},
			ImagePullPolicy:          corev1.PullIfNotPresent,
			SecurityContext:          containerSecurityContext(),
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			VolumeMounts:             []corev1.VolumeMount{{Name: "stackpilot-bin", MountPath: podBinDir}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
		}},
		Containers: []corev1.Container{{
			Name:    runnerContainer,
			Image:   p.Image,
			Command: []string{podRunner},
			Args: []string{"runner", "pod",
				"--endpoint", p.Endpoint,
				"--ca-file", podCredentialsDir + "/" + CAKey,
				"--credential-file", podCredentialsDir + "/" + CredentialKey,
				"--operation", p.OperationID,
				"--work-root", podWorkDir,
			},
			ImagePullPolicy:          rs.ImagePullPolicy,
			Env:                      append(runnerEnv(), extra.Env...),
			SecurityContext:          containerSecurityContext(),
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			VolumeMounts: append([]corev1.VolumeMount{
				{Name: "stackpilot-bin", MountPath: podBinDir, ReadOnly: true},
				{Name: "stackpilot-work", MountPath: podWorkDir},
				{Name: "tmp", MountPath: "/tmp"},
				{Name: "stackpilot-credentials", MountPath: podCredentialsDir, ReadOnly: true},
				{Name: "kube-api-access", MountPath: podTokenDir, ReadOnly: true},
			}, extra.VolumeMounts...),
		}},
		Volumes: append([]corev1.Volume{
			{Name: "stackpilot-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "stackpilot-work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "stackpilot-credentials", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				// Projected, like the token: the kubelet gives the files to the
				// Pod's user, so 0400 is readable by the runner and no one else.
				DefaultMode: ptr.To(int32(0o400)),
				Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: CredentialSecretName(p.Name)},
				}}},
			}}},
			{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To(int32(0o400)),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(tokenTTL))}},
					{ConfigMap: &corev1.ConfigMapProjection{
						LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
					}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
						Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
					}}}},
				},
			}}},
		}, extra.Volumes...),
	}
	if rs.Resources != nil {
		pod.Containers[0].Resources = *rs.Resources
	}

	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        p.Name,
			Namespace:   p.Stack.Namespace,
			Labels:      p.labels(),
			Annotations: annotations,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(int32(0)), // an operation is never run twice by Kubernetes
			Parallelism:             ptr.To(int32(1)),
			Completions:             ptr.To(int32(1)),
			ActiveDeadlineSeconds:   ptr.To(int64(p.ActiveDeadline.Seconds())),
			TTLSecondsAfterFinished: ptr.To(int32(p.TTLAfterFinished.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec:       pod,
			},
		},
	}
}

// runnerEnv is the runner container's own environment. HOME must be
// writable (the root file system is not); PULUMI_HOME is set per operation
// by the runner, under its work volume.
func runnerEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "HOME", Value: "/tmp"},
		{Name: "TMPDIR", Value: "/tmp"},
		{Name: "PULUMI_SKIP_UPDATE_CHECK", Value: "true"},
	}
}

// containerSecurityContext is what the restricted Pod Security level asks
// of every container, and no more.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// podSecurityContext takes the Stack's settings and keeps what the
// restricted level requires: a non-root user (65532 unless the Stack names
// one, since official images such as pulumi/pulumi-nodejs run as root) and
// a seccomp profile.
func podSecurityContext(user *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{}
	if user != nil {
		sc = user.DeepCopy()
	}
	if sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		sc.RunAsUser = ptr.To(int64(runnerUID))
	}
	if sc.RunAsGroup == nil {
		sc.RunAsGroup = ptr.To(int64(runnerUID))
	}
	if sc.FSGroup == nil {
		sc.FSGroup = ptr.To(int64(runnerUID))
	}
	sc.RunAsNonRoot = ptr.To(true)
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	return sc
}

// ownerReference makes obj owned (and garbage-collected) with owner.
func ownerReference(owner metav1.Object, apiVersion, kind string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         apiVersion,
		Kind:               kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         ptr.To(controller),
		BlockOwnerDeletion: ptr.To(true),
	}
}

func describeImage(image string) string {
	if image == "" {
		return "<no image>"
	}
	return image
}
