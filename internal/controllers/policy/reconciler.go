package policy

import (
	"context"
	"errors"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/policy"
)

// +kubebuilder:rbac:groups=stackpilot.dev,resources=stackpolicies;clusterstackpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=stackpilot.dev,resources=stackpolicies/status;clusterstackpolicies/status,verbs=get;update;patch

// policyObject is a StackPolicy or a ClusterStackPolicy.
type policyObject interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// Reconciler compiles one kind of policy and reports the verdict in its
// Ready condition. The verdict depends on the spec alone, so every replica
// and shard may write it (they write the same).
type Reconciler struct {
	Client client.Client
	// newObject makes an empty policy of the reconciled kind; compile
	// turns one into internal/policy's form.
	newObject func() policyObject
	compile   func(policyObject) policy.Policy
	observed  func(policyObject) *int64
}

// Setup registers the reconcilers of both kinds.
func Setup(mgr ctrl.Manager) error {
	for name, r := range map[string]*Reconciler{
		"stackpolicy": {Client: mgr.GetClient(),
			newObject: func() policyObject { return &v1alpha1.StackPolicy{} },
			compile:   func(o policyObject) policy.Policy { return StackPolicy(o.(*v1alpha1.StackPolicy)) },
			observed:  func(o policyObject) *int64 { return &o.(*v1alpha1.StackPolicy).Status.ObservedGeneration }},
		"clusterstackpolicy": {Client: mgr.GetClient(),
			newObject: func() policyObject { return &v1alpha1.ClusterStackPolicy{} },
			compile:   func(o policyObject) policy.Policy { return ClusterStackPolicy(o.(*v1alpha1.ClusterStackPolicy)) },
			observed:  func(o policyObject) *int64 { return &o.(*v1alpha1.ClusterStackPolicy).Status.ObservedGeneration }},
	} {
		err := ctrl.NewControllerManagedBy(mgr).
			For(r.newObject(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: 1, NeedLeaderElection: ptr.To(false)}).
			Named(name).
			Complete(r)
		if err != nil {
			return err
		}
	}
	return nil
}

// Reconcile compiles one policy and writes Ready.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.newObject()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopyObject().(client.Object)
	cond := metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue,
		Reason: v1alpha1.PolicyCompiledReason, Message: "every rule compiled", ObservedGeneration: obj.GetGeneration()}
	if invalid := compiled.check(r.compile(obj)); invalid != "" {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.InvalidRuleReason, invalid
	}
	conds := obj.GetConditions()
	apimeta.SetStatusCondition(&conds, cond)
	obj.SetConditions(conds)
	*r.observed(obj) = obj.GetGeneration()
	if err := r.Client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// Invalid is a compile error as a condition message: every broken rule,
// bounded.
func Invalid(err error) string {
	var ce *policy.CompileError
	if !errors.As(err, &ce) {
		return truncate(err.Error())
	}
	msg := ""
	for i, e := range ce.Errors {
		if i > 0 {
			msg += "; "
		}
		msg += e.Error()
	}
	return truncate(msg + " (no rule of the policy applies until it compiles; the Stacks it selects make no change)")
}

func truncate(s string) string {
	const limit = 2048
	if len(s) <= limit {
		return s
	}
	cut := limit - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
