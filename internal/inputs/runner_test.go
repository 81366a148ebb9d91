package inputs

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/serror"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// A Job Stack is refused, before any operation, what no runner Pod could
// run: no identity of its own, a backend on the controller's volume, a Pod
// template that takes the runner's variables, volumes or paths. Each is
// Stalled with a reason that names the fix; a Local Stack is not checked.
func TestResolveJobStack(t *testing.T) {
	ctx := context.Background()
	job := func(s *v1alpha1.Stack) { s.Spec.Runner = &v1alpha1.RunnerSpec{Executor: v1alpha1.ExecutorJob} }
	withSA := func(s *v1alpha1.Stack) { s.Spec.ServiceAccountName = "deployer" }
	s3 := func(s *v1alpha1.Stack) { s.Spec.Backend = "s3://state/infra" }
	template := func(spec v1alpha1.RunnerPodSpec) func(*v1alpha1.Stack) {
		return func(s *v1alpha1.Stack) {
			if s.Spec.Runner == nil {
				s.Spec.Runner = &v1alpha1.RunnerSpec{}
			}
			s.Spec.Runner.PodTemplate = &v1alpha1.RunnerPodTemplate{Spec: &spec}
		}
	}
	tests := []struct {
		name            string
		defaultExecutor string
		defaultSA       string
		defaultBackend  string
		mutate          []func(*v1alpha1.Stack)
		reason          string // "" resolves
		message         []string
		executor        string
	}{
		{name: "Job with a ServiceAccount and S3", mutate: []func(*v1alpha1.Stack){job, withSA, s3}, executor: "Job"},
		{name: "the default Job with the default ServiceAccount", defaultExecutor: "Job", defaultSA: "deployer",
			mutate: []func(*v1alpha1.Stack){s3}, executor: "Job"},
		{name: "Local is not checked", defaultBackend: "file:///data/state", executor: "Local",
			mutate: []func(*v1alpha1.Stack){template(v1alpha1.RunnerPodSpec{Env: []corev1.EnvVar{{Name: "PULUMI_HOME", Value: "/x"}}})}},
		{name: "Job without a ServiceAccount", mutate: []func(*v1alpha1.Stack){job, s3},
			reason: v1alpha1.RunnerServiceAccountMissingReason,
			message: []string{"spec.runner.executor is Job, and a Job never runs as the controller: set spec.serviceAccountName to a ServiceAccount of namespace infra",
				"or start the controller with --default-service-account"}},
		{name: "the default Job without a ServiceAccount", defaultExecutor: "Job", mutate: []func(*v1alpha1.Stack){s3},
			reason:  v1alpha1.RunnerServiceAccountMissingReason,
			message: []string{"the controller's --default-executor is Job (spec.runner.executor is not set), and a Job never runs as the controller"}},
		{name: "Job on a file backend", mutate: []func(*v1alpha1.Stack){job, withSA, func(s *v1alpha1.Stack) { s.Spec.Backend = "file:///data/state" }},
			reason: v1alpha1.BackendUnreachableFromRunnerReason,
			message: []string{"spec.backend is file:///data/state, a path on the controller's volume that the runner Pod cannot reach",
				"s3://, postgres://, azblob://, gs:// or Pulumi Cloud"}},
		{name: "Job on the default file backend", defaultExecutor: "Job", defaultSA: "deployer", defaultBackend: "file:///data/state/{namespace}",
			reason:  v1alpha1.BackendUnreachableFromRunnerReason,
			message: []string{"the controller's --default-backend (spec.backend is not set) is file:///data/state/infra"}},
		{name: "a runner variable", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{Env: []corev1.EnvVar{{Name: "AWS_REGION", Value: "eu-west-1"}, {Name: "PULUMI_CONFIG_PASSPHRASE", Value: "pw"}}})},
			reason:  v1alpha1.InvalidSpecReason,
			message: []string{"spec.runner.podTemplate.spec.env[1]: PULUMI_CONFIG_PASSPHRASE is set by the runner itself", "a passphrase goes in spec.secretsProvider"}},
		{name: "a variable of the runner's prefix", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{Env: []corev1.EnvVar{{Name: "STACKPILOT_ENDPOINT", Value: "https://evil"}}})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"env[0]: STACKPILOT_ENDPOINT is set by the runner itself"}},
		{name: "a mount under /tmp", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}, {Name: "x", MountPath: "/tmp/x"}}})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"volumeMounts[1]: mountPath /tmp/x would cover /tmp, which the runner mounts itself"}},
		{name: "a mount over /stackpilot's parent", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{VolumeMounts: []corev1.VolumeMount{{Name: "root", MountPath: "/"}}})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"volumeMounts[0]: mountPath / would cover /stackpilot"}},
		{name: "a relative mount", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{VolumeMounts: []corev1.VolumeMount{{Name: "x", MountPath: "stackpilot/../stackpilot/bin"}}})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"would cover /stackpilot"}},
		{name: "a mount beside the runner's", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{VolumeMounts: []corev1.VolumeMount{{Name: "x", MountPath: "/tmpfs"}, {Name: "y", MountPath: "/stackpilotx"}}})},
			executor: "Job"},
		{name: "a volume of the runner's name", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{Volumes: []corev1.Volume{{Name: "stackpilot-runner"}}})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"volumes[0]: the name stackpilot-runner is the runner's"}},
		{name: "a volume of the runner's other names", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{Volumes: []corev1.Volume{{Name: "cache"}, {Name: "kube-api-access"}}})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"volumes[1]: the name kube-api-access is the runner's"}},
		{name: "a mount over the token's parent", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{VolumeMounts: []corev1.VolumeMount{{Name: "x", MountPath: "/var/run/secrets"}}})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"mountPath /var/run/secrets would cover /var/run/secrets/kubernetes.io/serviceaccount"}},
		{name: "TMPDIR", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{Env: []corev1.EnvVar{{Name: "TMPDIR", Value: "/data"}}})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"env[0]: TMPDIR is set by the runner itself"}},
		{name: "too many volumes", mutate: []func(*v1alpha1.Stack){job, withSA, s3,
			template(v1alpha1.RunnerPodSpec{Volumes: make([]corev1.Volume, MaxRunnerVolumes+1)})},
			reason: v1alpha1.InvalidSpecReason, message: []string{"spec.runner.podTemplate.spec.volumes: 51 volumes, at most 50"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithObjects(secret("pass", map[string]string{"passphrase": "pw-123456"}), secret("creds", map[string]string{"apiKey": "k"}),
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "infra"}}).Build()
			r := &Resolver{Client: c, DefaultBackend: tt.defaultBackend, DefaultServiceAccount: tt.defaultSA, DefaultExecutor: tt.defaultExecutor, DigestKey: testKey}
			s := stackFixture()
			for _, m := range tt.mutate {
				m(s)
			}
			in, err := r.Resolve(ctx, s)
			if tt.reason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(in.Executor).To(Equal(tt.executor))
				return
			}
			var st *serror.StallingError
			g.Expect(errors.As(err, &st)).To(BeTrue(), "Stalled, not retried: %v", err)
			g.Expect(st.Reason).To(Equal(tt.reason))
			for _, m := range tt.message {
				g.Expect(err.Error()).To(ContainSubstring(m))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("pw"), "no value of the template in the message")
		})
	}
}

// Through a real API server: a Job Stack whose Pod template brings volumes
// (schemaless in the CRD) is stored with them, and the resolver reading the
// stored Stack refuses its mount over the runner's /tmp.
func TestJobStackThroughAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	env, err := testenv.Start(testenv.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = env.Stop() }()
	ns := env.Namespace(t)

	s := stackFixture()
	s.Namespace = ns
	s.Spec.Backend = "s3://state/infra"
	s.Spec.ServiceAccountName = "deployer"
	s.Spec.Runner = &v1alpha1.RunnerSpec{Executor: v1alpha1.ExecutorJob, PodTemplate: &v1alpha1.RunnerPodTemplate{Spec: &v1alpha1.RunnerPodSpec{
		Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "corp-ca"}}}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/tmp/ca"}},
	}}}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	var stored v1alpha1.Stack
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), &stored)).To(Succeed())
	g.Expect(stored.Spec.Runner.PodTemplate.Spec.Volumes).To(Equal(s.Spec.Runner.PodTemplate.Spec.Volumes), "kept whole, not pruned")

	r := &Resolver{Client: env.Client, DigestKey: testKey}
	_, err = r.Resolve(ctx, &stored)
	var st *serror.StallingError
	g.Expect(errors.As(err, &st)).To(BeTrue(), "%v", err)
	g.Expect(st.Reason).To(Equal(v1alpha1.InvalidSpecReason))
	g.Expect(err.Error()).To(ContainSubstring("spec.runner.podTemplate.spec.volumeMounts[0]: mountPath /tmp/ca would cover /tmp"))

	stored.Spec.Runner.PodTemplate.Spec.VolumeMounts[0].MountPath = "/etc/corp-ca"
	stored.Spec.ServiceAccountName = ""
	g.Expect(env.Client.Update(ctx, &stored)).To(Succeed())
	_, err = r.Resolve(ctx, &stored)
	g.Expect(errors.As(err, &st)).To(BeTrue(), "%v", err)
	g.Expect(st.Reason).To(Equal(v1alpha1.RunnerServiceAccountMissingReason))
}

// Where the controller runs Jobs by default, a Stack may not choose Local
// (which runs inside the controller) outside the controller's namespace,
// unless the controller allows it.
func TestResolveLocalUnderJobDefault(t *testing.T) {
	ctx := context.Background()
	local := func(ns string) *v1alpha1.Stack {
		s := stackFixture()
		s.Namespace = ns
		s.Spec.Backend = "s3://state/x"
		s.Spec.Runner = &v1alpha1.RunnerSpec{Executor: v1alpha1.ExecutorLocal}
		return s
	}
	objs := func(ns string) []client.Object {
		return []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pass", Namespace: ns}, Data: map[string][]byte{"passphrase": []byte("pw-123456")}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, Data: map[string][]byte{"apiKey": []byte("k")}},
		}
	}
	c := fake.NewClientBuilder().WithObjects(append(objs("infra"), objs("stackpilot-system")...)...).Build()
	tests := []struct {
		name, ns, dflt string
		allow          bool
		refused        bool
	}{
		{name: "refused in a tenant's namespace", ns: "infra", dflt: "Job", refused: true},
		{name: "the controller's namespace may", ns: "stackpilot-system", dflt: "Job"},
		{name: "allowed by the controller", ns: "infra", dflt: "Job", allow: true},
		{name: "Local is the default anyway", ns: "infra", dflt: "Local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Resolver{Client: c, DefaultExecutor: tt.dflt, LocalNamespace: "stackpilot-system", AllowLocal: tt.allow, DigestKey: testKey}
			in, err := r.Resolve(ctx, local(tt.ns))
			if !tt.refused {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(in.Executor).To(Equal("Local"))
				return
			}
			var st *serror.StallingError
			g.Expect(errors.As(err, &st)).To(BeTrue(), "%v", err)
			g.Expect(st.Reason).To(Equal(v1alpha1.LocalExecutorNotAllowedReason))
			g.Expect(err.Error()).To(ContainSubstring("allows Local only in the controller's namespace (stackpilot-system): remove spec.runner.executor"))
			g.Expect(err.Error()).To(ContainSubstring("--allow-local-executor"))
		})
	}
}
