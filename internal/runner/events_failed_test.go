package runner

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

func failed(op apitype.OpType, urn string) events.EngineEvent {
	return events.EngineEvent{EngineEvent: apitype.EngineEvent{ResOpFailedEvent: &apitype.ResOpFailedEvent{
		Metadata: meta(op, urn)}}}
}

// TestEventsCountOnlyFinishedSteps: without the engine's summary (live
// progress, an operation cut short), a step counts once the engine reports
// it done; a failed step and one still running are no change made.
func TestEventsCountOnlyFinishedSteps(t *testing.T) {
	g := NewWithT(t)
	c := collect(false,
		pre(apitype.OpSame, urnStack), outs(apitype.OpSame, urnStack),
		pre(apitype.OpCreate, urnSvc), failed(apitype.OpCreate, urnSvc), // refused by the cluster
		pre(apitype.OpUpdate, urnCM, "data"), // still running when the operation ended
		pre(apitype.OpDelete, urnOld), outs(apitype.OpDelete, urnOld),
	)
	g.Expect(c.counts()).To(Equal(ChangeCounts{Delete: 1, Same: 1}))
	// The resources the engine tried are still listed, with their step.
	g.Expect(c.changes()).To(HaveLen(3))

	// A step that later finishes counts then (the live progress).
	c = collect(false, pre(apitype.OpUpdate, urnCM, "data"))
	g.Expect(c.counts()).To(Equal(ChangeCounts{}))
	c.handle(outs(apitype.OpUpdate, urnCM, "data"))
	g.Expect(c.counts()).To(Equal(ChangeCounts{Update: 1}))
}

// TestEventsDropTheAmbientPluginWarning: Pulumi warns, on the language
// host's stderr, each time it uses a plugin found on $PATH (where the
// controller image and bin/ keep the pinned Kubernetes provider); that
// line must not come before the user's problem in a failure message.
func TestEventsDropTheAmbientPluginWarning(t *testing.T) {
	g := NewWithT(t)
	warning := "warning: using pulumi-resource-kubernetes from $PATH at /usr/local/bin/pulumi-resource-kubernetes\n"
	c := collect(false,
		diag("info#err", "", warning),
		diag("info#err", "", warning+"warning: using pulumi-resource-random from $PATH at /opt/bin/pulumi-resource-random expected /opt/pulumi/pulumi-resource-random\n"),
		diag("error", urnCM, `configmaps "cm" is forbidden`),
		diag("info#err", "", "warning: a warning of the program itself\n"),
	)
	g.Expect(c.errors()).To(Equal([]string{
		`kubernetes:core/v1:ConfigMap (cm): configmaps "cm" is forbidden`,
		"warning: a warning of the program itself",
	}))
}
