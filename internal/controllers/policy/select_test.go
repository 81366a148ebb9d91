package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/policy"
)

func rules(expr string) []v1alpha1.PolicyRule {
	return []v1alpha1.PolicyRule{{Name: "r", Expression: expr}}
}

// For picks the policies whose selectors match the Stack and its
// Namespace, cluster ones first, each kind by name, and refuses a selecting
// policy that does not compile.
func TestForSelectsByLabelsAndRefusesABrokenPolicy(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	match := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"tier": "tenant"}}},
		&v1alpha1.ClusterStackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "z-all"}, Spec: v1alpha1.ClusterStackPolicySpec{Rules: rules("true")}},
		&v1alpha1.ClusterStackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "a-tenants"}, Spec: v1alpha1.ClusterStackPolicySpec{
			NamespaceSelector: match("tier", "tenant"), Rules: rules("true")}},
		&v1alpha1.ClusterStackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform-only"}, Spec: v1alpha1.ClusterStackPolicySpec{
			NamespaceSelector: match("tier", "platform"), Rules: rules("true")}},
		&v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "team-a"}, Spec: v1alpha1.StackPolicySpec{
			Selector: match("env", "prod"), Rules: rules("true")}},
		&v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dev", Namespace: "team-a"}, Spec: v1alpha1.StackPolicySpec{
			Selector: match("env", "dev"), Rules: rules("resource.nme == 1")}},
		&v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "team-b"}, Spec: v1alpha1.StackPolicySpec{Rules: rules("true")}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build()
	stack := func(env string) *v1alpha1.Stack {
		return &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team-a", Labels: map[string]string{"env": env}}}
	}
	spec, prodDigest, err := For(context.Background(), c, c, stack("prod"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range spec.Policies {
		got = append(got, p.Kind+"/"+p.ID())
	}
	if want := "ClusterStackPolicy/a-tenants ClusterStackPolicy/z-all StackPolicy/team-a/prod"; strings.Join(got, " ") != want {
		t.Errorf("selected %v, want %s", got, want)
	}
	if spec.Stack.Namespace != "team-a" || spec.Stack.Labels["env"] != "prod" {
		t.Errorf("stack %+v", spec.Stack)
	}

	_, devDigest, err := For(context.Background(), c, c, stack("dev"))
	var invalid *InvalidError
	if !errors.As(err, &invalid) || invalid.Policy != "StackPolicy team-a/dev" || !strings.Contains(invalid.Message, "undefined field 'nme'") {
		t.Errorf("a selecting policy that does not compile: %v", err)
	}
	// A policy that does not compile has a digest too: its fix changes it.
	if prodDigest == "" || devDigest == "" || prodDigest == devDigest {
		t.Errorf("digests: prod %q, dev %q; want two, different", prodDigest, devDigest)
	}
	for env, want := range map[string]string{"prod": prodDigest, "dev": devDigest} {
		if got, err := DigestFor(context.Background(), c, c, stack(env)); err != nil || got != want {
			t.Errorf("DigestFor(%s) = %q, %v; want For's %q", env, got, err, want)
		}
	}

	none := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team-c"}}
	c2 := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-c"}},
		&v1alpha1.ClusterStackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}, Spec: v1alpha1.ClusterStackPolicySpec{
			NamespaceSelector: match("tier", "tenant"), Rules: rules("true")}}).Build()
	if spec, digest, err := For(context.Background(), c2, c2, none); err != nil || spec != nil || digest != "" {
		t.Errorf("no selecting policy: %+v, %q, %v; want nil, \"\", nil", spec, digest, err)
	}
}

// TestDigestFollowsRulesNotMetadata: the digest changes with what a policy
// enforces (a rule's expression, its enforcement, a policy added), not
// with the order of the call or anything else.
func TestDigestFollowsRulesNotMetadata(t *testing.T) {
	base := func() []policy.Policy {
		return []policy.Policy{ClusterStackPolicy(&v1alpha1.ClusterStackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "all", Generation: 1},
			Spec: v1alpha1.ClusterStackPolicySpec{Rules: rules("true")}})}
	}
	d := Digest(base())
	if d == "" || d != Digest(base()) {
		t.Fatalf("digest %q not stable", d)
	}
	changed := base()
	changed[0].Rules[0].Expression = "false"
	if Digest(changed) == d {
		t.Error("a changed expression kept the digest")
	}
	changed = base()
	changed[0].Rules[0].Enforcement = policy.Advisory
	if Digest(changed) == d {
		t.Error("a changed enforcement kept the digest")
	}
	if Digest(append(base(), base()[0])) == d {
		t.Error("a second policy kept the digest")
	}
	if Digest(nil) != "" {
		t.Error("no policy has a digest")
	}
}
