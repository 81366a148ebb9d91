package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestZZScratchDrift(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("drifty", func(*v1alpha1.Stack) {})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitApplied(t, key, f.commit)
	t.Logf("after apply drift=%+v", s.Status.Drift)
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = f.ns, "app-settings"
	g.Expect(env.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"color":"red"}}`)))).To(Succeed())
	drift := func(mode v1alpha1.DriftMode) *v1alpha1.Stack {
		if mode != "" {
			p := `{"spec":{"driftDetection":{"mode":"` + string(mode) + `"}}}`
			g.Expect(env.Client.Patch(ctx, &v1alpha1.Stack{ObjectMeta: s.ObjectMeta}, client.RawPatch(types.MergePatchType, []byte(p)))).To(Succeed())
		}
		value := "drift-" + time.Now().Format(time.RFC3339Nano)
		patch := `{"metadata":{"annotations":{"stackpilot.dev/requestedAt":"` + value + `"}}}`
		g.Expect(env.Client.Patch(ctx, &v1alpha1.Stack{ObjectMeta: s.ObjectMeta}, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		out := waitHandled(t, key, value)
		b, _ := json.MarshalIndent(out.Status, "", " ")
		t.Logf("status: %s", b)
		return out
	}
	drift("")
	drift("")
	drift(v1alpha1.DriftRemediate)
	t.Logf("data: %v", configMapData(g, f.ns, "app-settings"))
	drift("")
	t.Logf("events: %v", stackEvents(t, f.ns, "drifty"))
}
