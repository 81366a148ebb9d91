// Package plantest stores plans for the tests of what reads them (the
// plans endpoint, the approval step, the data dir's pruning) the way a
// preview would, without running one. Only tests import it.
package plantest

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

// Document is plan id of the Stack ns/web, changing one property of one
// resource, with no approval mode.
func Document(id string) *plan.Document {
	return &plan.Document{APIVersion: plan.APIVersion, ID: id, Namespace: "ns", Name: "web",
		Resources: []v1alpha1.PlannedResource{{URN: "urn:a", Op: "update", Properties: []string{"data.color"}}}}
}

// Put stores doc as plan doc.ID of the Stack uid, as a preview does: staged,
// with a stand-in for Pulumi's update plan, then committed.
func Put(t testing.TB, s *plan.Store, uid types.UID, doc *plan.Document) *plan.Document {
	t.Helper()
	file, err := s.Stage(uid, doc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"pulumi":"plan"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(uid, doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// Stored stores Document(id) for the Stack uid.
func Stored(t testing.TB, s *plan.Store, uid types.UID, id string) *plan.Document {
	t.Helper()
	return Put(t, s, uid, Document(id))
}
