package controller

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

func TestReasonOfTakesTheOutermostTypedError(t *testing.T) {
	g := NewWithT(t)
	missing := waiting("InputsNotFound", "Secret pulumi-passphrase not found")
	destroy := transient("DestroyFailed", fmt.Errorf("destroy: %w", missing))
	g.Expect(reasonOf(destroy, "x")).To(Equal("DestroyFailed"))
	g.Expect(outermostTyped(fmt.Errorf("finalize: %w", destroy))).To(BeIdenticalTo(destroy))
	g.Expect(reasonOf(fmt.Errorf("destroy: %w", missing), "x")).To(Equal("InputsNotFound"))
	g.Expect(reasonOf(stalling("InvalidSpec", "spec.source: %s", "empty"), "x")).To(Equal("InvalidSpec"))
	g.Expect(reasonOf(errors.New("plain"), "OperationFailed")).To(Equal("OperationFailed"))
	g.Expect(outermostTyped(nil)).To(BeNil())
}
