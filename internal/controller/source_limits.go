package controller

import (
	"errors"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// limitFlag names the controller flag that sets the bound err reports, so
// a message over a bound says what an operator can change: a file count is
// --artifact-max-files, any size --artifact-max-size.
func limitFlag(err error) string {
	var gl *git.LimitError
	var al *artifact.LimitError
	switch {
	case errors.As(err, &gl) && gl.What == "file count", errors.As(err, &al) && al.Limit == "file count":
		return "--artifact-max-files"
	}
	return "--artifact-max-size"
}
