package stack

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

func TestPendingPlanOfBoundsTheStatus(t *testing.T) {
	g := NewWithT(t)
	doc := &plan.Document{ID: "plan-1", Revision: "main@sha1:a", Changes: v1alpha1.ChangeSummary{Create: 60}}
	for i := range 60 {
		r := v1alpha1.PlannedResource{URN: fmt.Sprintf("urn:%d", i), Op: "create"}
		for j := range 30 {
			r.Properties = append(r.Properties, fmt.Sprintf("data.k%d", j))
		}
		doc.Resources = append(doc.Resources, r)
	}
	p := pendingPlanOf(doc)
	g.Expect(p.Total).To(Equal(int64(60)))
	g.Expect(p.Resources).To(HaveLen(v1alpha1.MaxPlanResources))
	g.Expect(p.Resources[0].Properties).To(HaveLen(v1alpha1.MaxPlanProperties))
	g.Expect(p.Resources[49].URN).To(Equal("urn:49"))
	g.Expect(doc.Resources[0].Properties).To(HaveLen(30), "the document keeps them all")
	g.Expect(p.Changes.Create).To(Equal(int64(60)))
}
