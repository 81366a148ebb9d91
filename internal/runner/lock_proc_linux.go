package runner

import (
	"time"

	"github.com/stackpilot/stackpilot/internal/procfs"
)

// procStart reports whether pid runs (a zombie does not) and when it started,
// from /proc (see internal/procfs). known is false when the start time cannot
// be read.
func procStart(pid int) (alive bool, started time.Time, known bool) {
	if !ProcessAlive(pid) {
		return false, time.Time{}, false
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return true, time.Time{}, false
	}
	started, err = st.Started()
	if err != nil {
		return true, time.Time{}, false
	}
	return true, started, true
}
