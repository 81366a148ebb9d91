package stack

import (
	"context"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	inp "github.com/stackpilot/stackpilot/internal/inputs"
)

// The pipeline's short names over package inputs, so that the steps read as
// they did when the resolver lived here.

type (
	inputs    = inp.Inputs
	DigestKey = inp.DigestKey
	Tenancy   = inp.Tenancy
)

var (
	scrub        = inp.Scrub
	upstreamName = inp.UpstreamName
	boundKeys    = inp.BoundKeys
	// errInputsNotKept: no snapshot of those inputs is kept.
	errInputsNotKept = inp.ErrNotKept
)

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// inputsResolver reads the objects a Stack references, with the
// controller's defaults.
func (r *StackReconciler) inputsResolver() inputsResolver {
	return inputsResolver{&inp.Resolver{Client: r.APIReader, DefaultBackend: r.DefaultBackend, DefaultPassphraseSecret: r.DefaultPassphraseSecret,
		DefaultServiceAccount: r.Tenancy.DefaultServiceAccount, DigestKey: r.DigestKey, AllowCrossNamespace: r.AllowCrossNamespaceRefs,
		DefaultExecutor: r.DefaultExecutor, LocalNamespace: r.PodNamespace, AllowLocal: r.AllowLocalExecutor}}
}

type inputsResolver struct{ *inp.Resolver }

func (r inputsResolver) resolve(ctx context.Context, stack *v1alpha1.Stack) (*inputs, error) {
	return r.Resolve(ctx, stack)
}

// runnerEnv is the environment of st's operation, its kubeconfig written
// into dir (inputs.Tenancy.Env).
func (r *StackReconciler) runnerEnv(ctx context.Context, st *reconcileState, dir string) (map[string]string, error) {
	return r.Tenancy.Env(ctx, r.Client, st.inputs, st.stack.Namespace, st.stack.GetTimeout(), dir)
}

// snapshots keeps the last applied inputs in InputsDir.
func (r *StackReconciler) snapshots() *inp.Snapshots {
	return &inp.Snapshots{Dir: r.InputsDir, Key: r.DigestKey}
}

// keepInputs keeps the inputs of the up that just succeeded, or, with
// rollback off, removes what was kept. A failure is logged: the up stands,
// and a rollback that needs these inputs later says they are not kept.
func (r *StackReconciler) keepInputs(ctx context.Context, st *reconcileState) {
	if r.InputsDir == "" {
		return
	}
	stack := st.stack
	if stack.RollbackAfter() == 0 {
		r.forgetInputs(ctx, stack.UID)
		return
	}
	if err := r.writeInputs(ctx, stack.UID, st.inputs); err != nil {
		r.logInputsNotKept(ctx, err)
	}
}

func (r *StackReconciler) logInputsNotKept(ctx context.Context, err error) {
	log.FromContext(ctx).Error(err, "keep the applied inputs for a rollback; a rollback to this revision will refuse to run unless the inputs are unchanged")
}

func (r *StackReconciler) writeInputs(ctx context.Context, uid types.UID, in *inputs) error {
	return r.snapshots().Write(ctx, uid, in)
}

func (r *StackReconciler) pruneInputs(ctx context.Context, uid types.UID, digest string) {
	r.snapshots().Prune(ctx, uid, digest)
}

func (r *StackReconciler) keptInputs(ctx context.Context, uid types.UID, digest string) (*inputs, error) {
	return r.snapshots().Kept(ctx, uid, digest)
}

func (r *StackReconciler) forgetInputs(ctx context.Context, uid types.UID) {
	r.snapshots().Forget(ctx, uid)
}
