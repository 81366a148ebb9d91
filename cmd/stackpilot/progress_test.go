package main

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Off a terminal, a new line only when the operation or its counts change.
func TestLiveProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := newLiveProgress(&b)
	start := time.Now()
	op := &v1alpha1.OperationRecord{ID: "up-20261201-101500-1a2b3c4d", Type: "up", StartedAt: metav1.NewTime(start)}
	p.update(op, start.Add(time.Second))
	p.update(op, start.Add(2*time.Second))
	op.Changes = &v1alpha1.ChangeSummary{Create: 3, Update: 1}
	p.update(op, start.Add(12*time.Second))
	p.update(nil, start)
	want := "up 1a2b…: 0 created, 0 updated, 0 deleted (1s)\nup 1a2b…: 3 created, 1 updated, 0 deleted (12s)\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
