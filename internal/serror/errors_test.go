package serror

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

func TestReasonOfTakesTheOutermostTypedError(t *testing.T) {
	g := NewWithT(t)
	missing := Waiting("InputsNotFound", "Secret pulumi-passphrase not found")
	destroy := Transient("DestroyFailed", fmt.Errorf("destroy: %w", missing))
	g.Expect(ReasonOf(destroy, "x")).To(Equal("DestroyFailed"))
	g.Expect(OutermostTyped(fmt.Errorf("finalize: %w", destroy))).To(BeIdenticalTo(destroy))
	g.Expect(ReasonOf(fmt.Errorf("destroy: %w", missing), "x")).To(Equal("InputsNotFound"))
	g.Expect(ReasonOf(Stalling("InvalidSpec", "spec.source: %s", "empty"), "x")).To(Equal("InvalidSpec"))
	g.Expect(ReasonOf(errors.New("plain"), "OperationFailed")).To(Equal("OperationFailed"))
	g.Expect(OutermostTyped(nil)).To(BeNil())
}
