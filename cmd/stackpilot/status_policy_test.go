package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// `stackpilot status` shows the policies that selected the Stack and what
// they found, mandatory first as the status keeps them; nothing when no
// policy selects the Stack.
func TestStatusShowsPolicyFindings(t *testing.T) {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team-a"}}
	var plain bytes.Buffer
	if err := writeStatus(&plain, newStatusReport(s), time.Now()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "Policies:") {
		t.Errorf("a Stack no policy selects shows a Policies section:\n%s", plain.String())
	}

	s.Status.Policy = &v1alpha1.StackPolicyStatus{OperationID: "up-1",
		Policies: []string{"ClusterStackPolicy/sizes", "StackPolicy/team-a/colors"},
		Violations: []v1alpha1.PolicyViolation{
			{Policy: "StackPolicy/team-a/colors/no-red", Enforcement: "mandatory", URN: "urn:pulumi:app::p::kubernetes:core/v1:ConfigMap::settings", Message: "ConfigMap settings would be red"},
			{Policy: "ClusterStackPolicy/sizes/has-size", Enforcement: "advisory", URN: "urn:pulumi:app::p::kubernetes:core/v1:ConfigMap::settings", Message: "every ConfigMap says its size"},
		},
		More: 3}
	var out bytes.Buffer
	if err := writeStatus(&out, newStatusReport(s), time.Now()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"Policies:      ClusterStackPolicy/sizes, StackPolicy/team-a/colors at up-1: 1 mandatory, 1 advisory finding(s)",
		"mandatory     StackPolicy/team-a/colors/no-red",
		"ConfigMap settings would be red",
		"advisory      ClusterStackPolicy/sizes/has-size",
		"... and 3 more",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, "no-red") > strings.Index(text, "has-size") {
		t.Errorf("the mandatory finding is not first:\n%s", text)
	}
}
