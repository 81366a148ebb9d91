package analyzer

import (
	"context"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/sig"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stackpilot/stackpilot/internal/policy"
)

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The wire form of secrets, unknowns, output values and references becomes
// what rules read.
func TestDecodeStruct(t *testing.T) {
	got := decodeStruct(mustStruct(t, map[string]any{
		"__defaults": []any{"x"},
		"plain":      "a",
		"n":          3.0,
		"unknown":    sig.UnknownStringValue,
		"secret":     map[string]any{sig.Key: sig.Secret, "value": "s3cr3t"},
		"outKnown":   map[string]any{sig.Key: sig.OutputValue, "value": "v", "dependencies": []any{"urn:x"}},
		"outSecret":  map[string]any{sig.Key: sig.OutputValue, "value": "w", "secret": true},
		"outUnknown": map[string]any{sig.Key: sig.OutputValue, "dependencies": []any{"urn:x"}},
		"ref":        map[string]any{sig.Key: sig.ResourceReference, "urn": "urn:pulumi:dev::p::t::n", "id": "i"},
		"nested":     map[string]any{"list": []any{sig.UnknownNumberValue, true}},
	}))
	want := map[string]any{
		"plain": "a", "n": 3.0, "unknown": policy.Unknown{}, "secret": policy.Secret{Value: "s3cr3t"},
		"outKnown": "v", "outSecret": policy.Secret{Value: "w"}, "outUnknown": policy.Unknown{},
		"ref": "urn:pulumi:dev::p::t::n", "nested": map[string]any{"list": []any{policy.Unknown{}, true}},
	}
	if len(got) != len(want) {
		t.Fatalf("keys: got %v, want %v", got, want)
	}
	for k, w := range want {
		if g := got[k]; !equal(g, w) {
			t.Errorf("%s: got %#v, want %#v", k, g, w)
		}
	}
}

func equal(a, b any) bool {
	switch b := b.(type) {
	case map[string]any:
		am, ok := a.(map[string]any)
		if !ok || len(am) != len(b) {
			return false
		}
		for k := range b {
			if !equal(am[k], b[k]) {
				return false
			}
		}
		return true
	case []any:
		al, ok := a.([]any)
		if !ok || len(al) != len(b) {
			return false
		}
		for i := range b {
			if !equal(al[i], b[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// The operation comes from the prior state; a rule limited to updates sees
// an update and its old inputs, not a registration that changed nothing;
// an undetermined mandatory rule blocks in an update only.
func TestAnalyzeOperationsAndUndetermined(t *testing.T) {
	p := policy.Policy{Kind: "ClusterStackPolicy", Name: "org", Rules: []policy.Rule{
		{Name: "no-shrink", Match: policy.Match{Operations: []policy.Operation{policy.Update}},
			Expression: "resource.inputs.size >= resource.oldInputs.size"},
		{Name: "region", Expression: "resource.inputs.region == 'eu'"},
		{Name: "frozen", Enforcement: policy.Advisory, Match: policy.Match{Operations: []policy.Operation{policy.Update}}, Expression: "false"},
	}}
	const urn = "urn:pulumi:dev::p::disk::d"
	s, err := newServer(Bundle{Policies: []policy.Policy{p}, Prior: map[string]map[string]any{urn: {"size": 20.0, "region": "eu"}}})
	if err != nil {
		t.Fatal(err)
	}
	analyze := func(inputs map[string]any, dryRun bool) []string {
		t.Helper()
		if _, err := s.ConfigureStack(context.Background(), &pulumirpc.AnalyzerStackConfigureRequest{DryRun: dryRun}); err != nil {
			t.Fatal(err)
		}
		resp, err := s.Analyze(context.Background(), &pulumirpc.AnalyzeRequest{Type: "disk", Name: "d", Urn: urn, Properties: mustStruct(t, inputs)})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range resp.GetDiagnostics() {
			out = append(out, d.GetPolicyName()+"="+d.GetEnforcementLevel().String())
		}
		return out
	}
	if got := analyze(map[string]any{"size": 20.0, "region": "eu"}, false); len(got) != 0 {
		t.Errorf("unchanged inputs: %v, want nothing", got)
	}
	if got := analyze(map[string]any{"size": 10.0, "region": "eu"}, false); len(got) != 2 || got[0] != "ClusterStackPolicy/org/no-shrink=MANDATORY" || got[1] != "ClusterStackPolicy/org/frozen=ADVISORY" {
		t.Errorf("shrinking update: %v, want no-shrink MANDATORY and frozen ADVISORY", got)
	}
	unknownRegion := map[string]any{"size": 20.0, "region": sig.UnknownStringValue}
	// An unknown input differs from the prior one: an update.
	if got := analyze(unknownRegion, true); len(got) != 2 || got[0] != "ClusterStackPolicy/org/region=ADVISORY" {
		t.Errorf("unknown region in a preview: %v, want region ADVISORY (and frozen)", got)
	}
	if got := analyze(unknownRegion, false); len(got) != 2 || got[0] != "ClusterStackPolicy/org/region=MANDATORY" {
		t.Errorf("unknown region in an update: %v, want region MANDATORY (and frozen)", got)
	}
}
