package runner

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

const (
	urnCM    = "urn:pulumi:dev::web::kubernetes:core/v1:ConfigMap::cm"
	urnDep   = "urn:pulumi:dev::web::kubernetes:apps/v1:Deployment::app"
	urnSvc   = "urn:pulumi:dev::web::kubernetes:core/v1:Service::svc"
	urnOld   = "urn:pulumi:dev::web::kubernetes:core/v1:Secret::old"
	urnStack = "urn:pulumi:dev::web::pulumi:pulumi:Stack::web-dev"
)

func pre(op apitype.OpType, urn string, diffs ...string) events.EngineEvent {
	return events.EngineEvent{EngineEvent: apitype.EngineEvent{ResourcePreEvent: &apitype.ResourcePreEvent{
		Metadata: meta(op, urn, diffs...)}}}
}

func outs(op apitype.OpType, urn string, diffs ...string) events.EngineEvent {
	return events.EngineEvent{EngineEvent: apitype.EngineEvent{ResOutputsEvent: &apitype.ResOutputsEvent{
		Metadata: meta(op, urn, diffs...)}}}
}

func meta(op apitype.OpType, urn string, diffs ...string) apitype.StepEventMetadata {
	_, typ := urnNameType(urn)
	return apitype.StepEventMetadata{Op: op, URN: urn, Type: typ, Diffs: diffs}
}

func diag(severity, urn, msg string) events.EngineEvent {
	return events.EngineEvent{EngineEvent: apitype.EngineEvent{DiagnosticEvent: &apitype.DiagnosticEvent{
		Severity: severity, URN: urn, Message: msg}}}
}

func collect(refreshIsChange bool, evs ...events.EngineEvent) *eventCollector {
	c := newEventCollector(refreshIsChange)
	ch := make(chan events.EngineEvent)
	stop := c.consume(ch)
	for _, ev := range evs {
		ch <- ev
	}
	stop()
	return c
}

func TestEventsOfAnUpdate(t *testing.T) {
	g := NewWithT(t)
	c := collect(false,
		pre(apitype.OpSame, urnStack), outs(apitype.OpSame, urnStack),
		pre(apitype.OpUpdate, urnCM, "data"), outs(apitype.OpUpdate, urnCM, "data", "metadata"),
		// A replacement is three steps; it is one replace.
		pre(apitype.OpCreateReplacement, urnDep, "spec"), outs(apitype.OpCreateReplacement, urnDep, "spec"),
		pre(apitype.OpReplace, urnDep, "spec"), outs(apitype.OpReplace, urnDep, "spec"),
		pre(apitype.OpDeleteReplaced, urnDep), outs(apitype.OpDeleteReplaced, urnDep),
		pre(apitype.OpCreate, urnSvc), outs(apitype.OpCreate, urnSvc),
		pre(apitype.OpDelete, urnOld), outs(apitype.OpDelete, urnOld),
		pre(apitype.OpRead, "urn:pulumi:dev::web::kubernetes:core/v1:Namespace::ns"),
	)
	g.Expect(c.changes()).To(Equal([]ResourceChange{
		{URN: urnCM, Type: "kubernetes:core/v1:ConfigMap", Op: "update", Properties: []string{"data", "metadata"}, Paths: []string{"data", "metadata"}},
		{URN: urnDep, Type: "kubernetes:apps/v1:Deployment", Op: "replace", Properties: []string{"spec"}, Paths: []string{"spec"}},
		{URN: urnSvc, Type: "kubernetes:core/v1:Service", Op: "create"},
		{URN: urnOld, Type: "kubernetes:core/v1:Secret", Op: "delete"},
	}))
	g.Expect(c.counts()).To(Equal(ChangeCounts{Create: 1, Update: 1, Replace: 1, Delete: 1, Same: 1}))
}

func TestEventsPreferTheEngineSummary(t *testing.T) {
	g := NewWithT(t)
	c := collect(false, pre(apitype.OpCreate, urnSvc),
		events.EngineEvent{EngineEvent: apitype.EngineEvent{SummaryEvent: &apitype.SummaryEvent{
			ResourceChanges: map[apitype.OpType]int{"create": 2, "same": 7, "create-replacement": 1, "delete-replaced": 1}}}})
	g.Expect(c.counts()).To(Equal(ChangeCounts{Create: 2, Same: 7, Replace: 1}))
}

func TestEventsOfARefresh(t *testing.T) {
	g := NewWithT(t)
	evs := []events.EngineEvent{
		// The pre-event says "refresh"; the outputs event carries the result.
		pre(apitype.OpRefresh, urnCM), outs(apitype.OpUpdate, urnCM, "data"),
		pre(apitype.OpRefresh, urnSvc), outs(apitype.OpSame, urnSvc),
		pre(apitype.OpRefresh, urnOld), outs(apitype.OpDelete, urnOld),
	}
	drift := collect(true, evs...)
	g.Expect(drift.changes()).To(Equal([]ResourceChange{
		{URN: urnCM, Type: "kubernetes:core/v1:ConfigMap", Op: "update", Properties: []string{"data"}, Paths: []string{"data"}},
		{URN: urnOld, Type: "kubernetes:core/v1:Secret", Op: "delete"},
	}))

	// The same refresh as the first phase of `up --refresh`: not the update's changes.
	up := collect(false, append(evs, pre(apitype.OpSame, urnCM), outs(apitype.OpSame, urnCM))...)
	g.Expect(up.changes()).To(BeEmpty())
	g.Expect(up.counts()).To(Equal(ChangeCounts{Same: 1}))
}

func TestEventsPropertiesFromDetailedDiff(t *testing.T) {
	g := NewWithT(t)
	m := apitype.StepEventMetadata{Op: "update", URN: urnCM, Type: "t",
		DetailedDiff: map[string]apitype.PropertyDiff{"data.key": {}, `metadata["labels"]`: {}, `["odd.name"]`: {}}}
	c := collect(false, events.EngineEvent{EngineEvent: apitype.EngineEvent{ResOutputsEvent: &apitype.ResOutputsEvent{Metadata: m}}})
	g.Expect(c.changes()[0].Properties).To(Equal([]string{"data", "metadata", "odd.name"}))
}

func detailed(op apitype.OpType, urn string, paths ...string) apitype.StepEventMetadata {
	m := meta(op, urn, "data") // diffs: the roots, as the engine sends them
	m.DetailedDiff = map[string]apitype.PropertyDiff{}
	for _, p := range paths {
		m.DetailedDiff[p] = apitype.PropertyDiff{Kind: apitype.DiffUpdate}
	}
	return m
}

func TestEventsPathsFromDetailedDiff(t *testing.T) {
	g := NewWithT(t)
	ann := `metadata.annotations["cert-manager.io/foo"]`
	c := collect(true,
		pre(apitype.OpRefresh, urnCM),
		events.EngineEvent{EngineEvent: apitype.EngineEvent{ResOutputsEvent: &apitype.ResOutputsEvent{
			Metadata: detailed(apitype.OpUpdate, urnCM, "data.b", ann, "data.a")}}},
		// A second event of the same URN: its paths are merged, duplicates once.
		pre(apitype.OpRefresh, urnCM),
		events.EngineEvent{EngineEvent: apitype.EngineEvent{ResOutputsEvent: &apitype.ResOutputsEvent{
			Metadata: detailed(apitype.OpUpdate, urnCM, "data.a", `data["x.y"]`)}}},
		// No detailed diff: the engine's diffs are the paths.
		pre(apitype.OpRefresh, urnSvc), outs(apitype.OpUpdate, urnSvc, "spec", "metadata"),
	)
	ch := c.changes()
	g.Expect(ch).To(HaveLen(2))
	g.Expect(ch[0].Paths).To(Equal([]string{"data.a", "data.b", `data["x.y"]`, ann}))
	g.Expect(ch[0].Properties).To(Equal([]string{"data"}))
	g.Expect(ch[1].Paths).To(Equal([]string{"metadata", "spec"}))
	g.Expect(ch[1].Properties).To(Equal([]string{"metadata", "spec"}))
}

func TestEventsDiagnostics(t *testing.T) {
	g := NewWithT(t)
	c := collect(false,
		diag("info", "", "just saying"),
		diag("warning", urnCM, "careful"),
		diag("error", urnCM, "<{%fg 1%}>configmaps \"cm\" is forbidden<{%reset%}>\n  \x1b[31mdetails\x1b[0m  \n"),
		diag("error", urnStack, "update failed\n"),
		diag("error", urnStack, "update failed\n"),
	)
	g.Expect(c.errors()).To(Equal([]string{
		`kubernetes:core/v1:ConfigMap (cm): configmaps "cm" is forbidden`,
		"details",
		"update failed",
	}))
}

func TestEventsDiagnosticTypeName(t *testing.T) {
	g := NewWithT(t)
	name, typ := urnNameType("urn:pulumi:dev::web::my:component:Thing$kubernetes:core/v1:ConfigMap::cm")
	g.Expect(name).To(Equal("cm"))
	g.Expect(typ).To(Equal("kubernetes:core/v1:ConfigMap"))
	name, _ = urnNameType("not-a-urn")
	g.Expect(name).To(BeEmpty())
}
