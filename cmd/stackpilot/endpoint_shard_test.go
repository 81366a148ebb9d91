package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestControllerServiceForStack: logs and plans are asked of the controller
// that runs the Stack's operations: its shard's Service, unless the user
// named one.
func TestControllerServiceForStack(t *testing.T) {
	sharded := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.ShardLabel: "shard2"}}}
	for _, tc := range []struct {
		service string
		stack   *v1alpha1.Stack
		want    string
	}{
		{"", nil, "stackpilot-controller"},
		{"", &v1alpha1.Stack{}, "stackpilot-controller"},
		{"", sharded, "stackpilot-controller-shard2"},
		{"mine", sharded, "mine"},
	} {
		if got := (controllerOptions{service: tc.service}).forStack(tc.stack).service; got != tc.want {
			t.Errorf("--controller-service %q, Stack labels %v: %q, want %q", tc.service, tc.stack, got, tc.want)
		}
	}
}
