package stack

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

func TestSplitPropertyPath(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string][]string{
		"spec.replicas": {"spec", "replicas"},
		`metadata.annotations["cert-manager.io/x"]`: {"metadata", "annotations", "cert-manager.io/x"},
		`metadata.annotations["cert-manager.io/*"]`: {"metadata", "annotations", "cert-manager.io/*"},
		"spec.ports[0].port":                        {"spec", "ports", "0", "port"},
		`data["a.b"]`:                               {"data", "a.b"},
		`["odd.name"]`:                              {"odd.name"},
		`data["say \"hi\""]`:                        {"data", `say "hi"`},
	} {
		g.Expect(splitPropertyPath(in)).To(Equal(want), in)
	}
}

func TestGlobMatch(t *testing.T) {
	g := NewWithT(t)
	g.Expect(globMatch("*", "kubernetes:apps/v1:Deployment")).To(BeTrue())
	g.Expect(globMatch("kubernetes:*", "kubernetes:apps/v1:Deployment")).To(BeTrue(), "* crosses / and :")
	g.Expect(globMatch("kubernetes:*:Deployment", "kubernetes:apps/v1:Deployment")).To(BeTrue())
	g.Expect(globMatch("aws:*", "kubernetes:apps/v1:Deployment")).To(BeFalse())
	g.Expect(globMatch("cert-manager.io/*", "cert-manager.io/issuer")).To(BeTrue())
	g.Expect(globMatch("cert-manager.io/*", "cert-manager.iox/issuer")).To(BeFalse())
	g.Expect(globMatch("web-?", "web-1")).To(BeTrue())
	g.Expect(globMatch("web-?", "web-12")).To(BeFalse())
	g.Expect(globMatch("web", "web-1")).To(BeFalse(), "no implicit prefix match")
}

func TestFilterDrift(t *testing.T) {
	const cm = "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::cfg"
	const dep = "urn:pulumi:dev::app::kubernetes:apps/v1:Deployment::web"
	const gone = "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::gone"
	changes := []runner.ResourceChange{
		{URN: cm, Type: "kubernetes:core/v1:ConfigMap", Op: "update", Properties: []string{"data", "metadata"},
			Paths: []string{"data.a", "data.b", `metadata.annotations["cert-manager.io/issuer"]`}},
		{URN: dep, Type: "kubernetes:apps/v1:Deployment", Op: "update", Properties: []string{"spec"}, Paths: []string{"spec.replicas"}},
		{URN: gone, Type: "kubernetes:core/v1:ConfigMap", Op: "delete"},
	}
	tests := []struct {
		name        string
		rules       []v1alpha1.DriftIgnoreRule
		wantDrifted []v1alpha1.DriftedResource
		wantIgnored map[string][]string
	}{
		{
			name: "no rules: everything is drift",
			wantDrifted: []v1alpha1.DriftedResource{
				{URN: cm, Type: "kubernetes:core/v1:ConfigMap", Name: "cfg", Op: "update",
					Properties: []string{"data.a", "data.b", `metadata.annotations["cert-manager.io/issuer"]`}},
				{URN: dep, Type: "kubernetes:apps/v1:Deployment", Name: "web", Op: "update", Properties: []string{"spec.replicas"}},
				{URN: gone, Type: "kubernetes:core/v1:ConfigMap", Name: "gone", Op: "delete"},
			},
			wantIgnored: map[string][]string{},
		},
		{
			name: "an ignored path leaves the others of the same resource",
			rules: []v1alpha1.DriftIgnoreRule{
				{Type: "kubernetes:core/v1:ConfigMap", Name: "*", Properties: []string{"data.a", `metadata.annotations["cert-manager.io/*"]`}},
				{Type: "kubernetes:apps/v1:Deployment", Properties: []string{"spec.replicas"}},
			},
			wantDrifted: []v1alpha1.DriftedResource{
				{URN: cm, Type: "kubernetes:core/v1:ConfigMap", Name: "cfg", Op: "update", Properties: []string{"data.b"}},
				{URN: gone, Type: "kubernetes:core/v1:ConfigMap", Name: "gone", Op: "delete"},
			},
			wantIgnored: map[string][]string{
				cm:  {"data.a", `metadata.annotations["cert-manager.io/issuer"]`},
				dep: {"spec.replicas"},
			},
		},
		{
			name: "a parent path covers what is under it; a rule for another name does not apply",
			rules: []v1alpha1.DriftIgnoreRule{
				{Name: "cfg", Properties: []string{"data"}},
				{Name: "other", Properties: []string{"spec"}},
			},
			wantDrifted: []v1alpha1.DriftedResource{
				{URN: cm, Type: "kubernetes:core/v1:ConfigMap", Name: "cfg", Op: "update",
					Properties: []string{`metadata.annotations["cert-manager.io/issuer"]`}},
				{URN: dep, Type: "kubernetes:apps/v1:Deployment", Name: "web", Op: "update", Properties: []string{"spec.replicas"}},
				{URN: gone, Type: "kubernetes:core/v1:ConfigMap", Name: "gone", Op: "delete"},
			},
			wantIgnored: map[string][]string{cm: {"data.a", "data.b"}},
		},
		{
			name: "a deletion is ignored only by a rule for the whole resource",
			rules: []v1alpha1.DriftIgnoreRule{
				{Name: "gone", Properties: []string{"data"}},
				{Type: "kubernetes:apps/v1:*"},
			},
			wantDrifted: []v1alpha1.DriftedResource{
				{URN: cm, Type: "kubernetes:core/v1:ConfigMap", Name: "cfg", Op: "update",
					Properties: []string{"data.a", "data.b", `metadata.annotations["cert-manager.io/issuer"]`}},
				{URN: gone, Type: "kubernetes:core/v1:ConfigMap", Name: "gone", Op: "delete"},
			},
			wantIgnored: map[string][]string{dep: nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := filterDrift(changes, tt.rules)
			g.Expect(got.Drifted).To(Equal(tt.wantDrifted))
			g.Expect(got.Ignored).To(Equal(tt.wantIgnored))
		})
	}
}

func TestFilterDriftFallsBackToPropertyNames(t *testing.T) {
	g := NewWithT(t)
	urn := "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::cfg"
	got := filterDrift([]runner.ResourceChange{{URN: urn, Op: "update", Properties: []string{"data"}}},
		[]v1alpha1.DriftIgnoreRule{{Properties: []string{"data"}}})
	g.Expect(got.Drifted).To(BeEmpty())
	g.Expect(got.Ignored).To(Equal(map[string][]string{urn: {"data"}}))
}

func TestBoundDrift(t *testing.T) {
	g := NewWithT(t)
	var many []v1alpha1.DriftedResource
	for i := range 70 {
		var props []string
		for j := range 30 {
			props = append(props, "data.k"+string(rune('a'+j%26))+string(rune('a'+i%26)))
		}
		many = append(many, v1alpha1.DriftedResource{URN: "urn:x", Op: "update", Properties: props})
	}
	got := boundDrift(many)
	g.Expect(got).To(HaveLen(v1alpha1.MaxDriftResources))
	for _, d := range got {
		g.Expect(d.Properties).To(HaveLen(v1alpha1.MaxDriftProperties))
	}
	g.Expect(many[0].Properties).To(HaveLen(30), "the input is not changed")
}
