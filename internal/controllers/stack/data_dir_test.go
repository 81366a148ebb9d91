package stack

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/plan/plantest"
)

// dataDirFixture is a Stack with rollback on, applied with inputs A, and a
// reconciler with a data dir.
func dataDirFixture(t *testing.T) (*StackReconciler, *reconcileState) {
	t.Helper()
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "net", Namespace: "infra", UID: "u-1", Generation: 1},
		Spec: v1alpha1.StackSpec{Rollback: &v1alpha1.Rollback{Enabled: true}, Interval: metav1.Duration{Duration: 3600e9}}}
	stack.Status.InputsDigest = "hmac-sha256:A"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack).WithStatusSubresource(stack).Build()
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	plans, err := plan.NewStore(filepath.Join(t.TempDir(), "plans"))
	g.Expect(err).NotTo(HaveOccurred())
	r := &StackReconciler{Client: c, APIReader: c, InputsDir: t.TempDir(), Plans: plans,
		DigestKey: staticDigestKey(bytes.Repeat([]byte{7}, digestKeySize))}
	return r, stateOf(r, stack)
}

// TestDataDirCrashWindows (issue 21, item 25): what the data dir holds is
// replaced only once the status that names the new files is in the API
// server, so a controller that dies in between leaves no status naming a
// file that is gone, and no file that nothing would ever remove.
func TestDataDirCrashWindows(t *testing.T) {
	t.Run("inputs", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		r, st := dataDirFixture(t)
		g.Expect(r.writeInputs(ctx, "u-1", &inputs{Digest: "hmac-sha256:A", Env: map[string]string{}})).To(Succeed())

		// The up of inputs B succeeded; the controller dies before its status
		// lands. The rerun of B fails, and its rollback needs A.
		st.inputs = &inputs{Digest: "hmac-sha256:B", Env: map[string]string{}}
		r.keepInputs(ctx, st)
		_, err := r.keptInputs(ctx, "u-1", "hmac-sha256:A")
		g.Expect(err).NotTo(HaveOccurred(), "the applied inputs stay until the status records the up")

		// Once the status records the up of B, A goes.
		st.stack.Status.InputsDigest = "hmac-sha256:B"
		_, err = r.summarize(ctx, st, nil)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = r.keptInputs(ctx, "u-1", "hmac-sha256:A")
		g.Expect(err).To(MatchError(errInputsNotKept))
		_, err = r.keptInputs(ctx, "u-1", "hmac-sha256:B")
		g.Expect(err).NotTo(HaveOccurred())
	})
	t.Run("plans", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		r, st := dataDirFixture(t)
		// A plan committed by a controller that died before its status
		// named it, and the pending plan the status names.
		plantest.Stored(t, r.Plans, "u-1", "plan-orphan")
		plantest.Stored(t, r.Plans, "u-1", "plan-pending")
		st.stack.Status.PendingPlan = &v1alpha1.PendingPlan{ID: "plan-pending"}
		_, err := r.summarize(ctx, st, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Plans.Has("u-1", "plan-pending")).To(BeTrue())
		g.Expect(filepath.Dir(r.Plans.PlanFile("u-1", "plan-orphan"))).NotTo(BeADirectory(), "the orphan plan is collected")
	})
}
