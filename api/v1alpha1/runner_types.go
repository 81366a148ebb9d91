package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Executors: where a Stack's operations run.
const (
	// ExecutorLocal runs each operation as a child process of the controller,
	// in the controller's container, as the controller's user.
	ExecutorLocal = "Local"
	// ExecutorJob runs each operation in its own Job (one Pod) in the Stack's
	// namespace, as the Stack's ServiceAccount, from the runner image.
	ExecutorJob = "Job"
)

// RunnerSpec says where and how the Stack's operations run.
type RunnerSpec struct {
	// Executor is where operations run: Local (a process of the controller)
	// or Job (one Pod per operation in the Stack's namespace, acting as the
	// Stack's ServiceAccount). Defaults to the controller's --default-executor.
	// +kubebuilder:validation:Enum=Local;Job
	// +optional
	Executor string `json:"executor,omitempty"`

	// Image is the runner Pod's image (Job executor only): any image with
	// `pulumi` and the program's language host on PATH, such as
	// pulumi/pulumi-nodejs. Stackpilot's runner is copied into the Pod by an
	// init container, so the image needs nothing of Stackpilot's. Defaults
	// to the controller's --runner-image.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the runner Pod's image.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets for the runner Pod's image, in the Stack's namespace.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Resources of the runner container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodTemplate adds to the runner Pod what a platform team sets on its
	// workloads. The controller keeps the fields it owns (the containers'
	// commands, the service account token, the security settings the
	// restricted Pod Security level requires).
	// +optional
	PodTemplate *RunnerPodTemplate `json:"podTemplate,omitempty"`
}

// RunnerPodTemplate is what a Stack adds to its runner Pods.
type RunnerPodTemplate struct {
	// Metadata: labels and annotations added to the runner Pod.
	// +optional
	Metadata *RunnerPodMetadata `json:"metadata,omitempty"`
	// Spec: scheduling, security context, environment and volumes of the
	// runner Pod.
	// +optional
	Spec *RunnerPodSpec `json:"spec,omitempty"`
}

// RunnerPodMetadata is added to the runner Pod's metadata.
type RunnerPodMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RunnerPodSpec is added to the runner Pod's spec.
type RunnerPodSpec struct {
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// (Schemaless in the CRD, to keep it small enough for a client-side
	// apply; the API server checks it when the Job is created.)
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// SecurityContext of the runner Pod. Settings the restricted Pod
	// Security level requires (non-root, seccomp RuntimeDefault) are kept
	// whatever it says.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// Env is added to the runner container's environment (and so to
	// Pulumi's); names the runner sets itself are refused.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Volumes added to the runner Pod (at most 50).
	// (Schemaless in the CRD, to keep it small enough for a client-side
	// apply; the controller and the API server check it when the Job is
	// created.)
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// VolumeMounts added to the runner container; paths under /stackpilot
	// and /tmp are the runner's own and refused.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
}
