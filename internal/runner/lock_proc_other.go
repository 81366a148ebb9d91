//go:build !linux

package runner

import "time"

// procStart reports whether pid runs; its start time is unknown without /proc,
// so a live pid is never taken for a reused one.
func procStart(pid int) (alive bool, started time.Time, known bool) {
	return ProcessAlive(pid), time.Time{}, false
}
