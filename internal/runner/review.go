package runner

import (
	"errors"
	"os"
	"path/filepath"
)

// errReviewNoStack: a review found no stack where only the CLI can look,
// and creates none.
var errReviewNoStack = errors.New("the stack does not exist in its backend yet, and a pull request's preview creates nothing there: it is previewed once the Stack's first up has run (on a file:// backend it is previewed as an empty stack)")

// reviewBackend chooses where a review previews. A stack that has state is
// previewed where it is: a preview of the DIY backends takes no lock and
// writes no checkpoint. A stack of a file:// backend that has no state yet
// is previewed as a new, empty stack in a scratch backend, so that nothing
// is created in the real one (the runner would otherwise `stack init` it).
func (o *operation) reviewBackend() error {
	dir, ok := fileBackendDir(o.spec.Backend)
	if !ok {
		return nil
	}
	if openFileStack(dir, o.project, o.spec.StackName).exists() {
		return nil
	}
	scratch, err := os.MkdirTemp("", "stackpilot-review-")
	if err != nil {
		return err
	}
	o.scratch = scratch
	state := filepath.Join(scratch, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	o.spec.Backend = "file://" + state
	o.spec.Review = false // the scratch stack is ours to create and claim
	o.spec.Claim = ""
	return nil
}
