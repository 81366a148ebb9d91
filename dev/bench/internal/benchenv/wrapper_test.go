package benchenv

import (
	"testing"
	"time"
)

func TestWallInsideCountsOverlapsOnce(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	calls := []Call{
		{Start: at(5), End: at(6), Cmd: "stack output"}, // after a gap
		{Start: at(0), End: at(2), Cmd: "stack select"},
		{Start: at(1), End: at(3), Cmd: "up"},     // overlaps the first
		{Start: at(2.5), End: at(2.8), Cmd: "up"}, // inside the second
	}
	if got, want := WallInside(calls), 4*time.Second; got != want {
		t.Errorf("WallInside = %s, want %s (0-3s and 5-6s)", got, want)
	}
	if got := WallInside(nil); got != 0 {
		t.Errorf("WallInside(nil) = %s, want 0", got)
	}
	if got, want := Commands(calls), "stack select, up ×2, stack output"; got != want {
		t.Errorf("Commands = %q, want %q", got, want)
	}
	if got := CountCommand(calls, "up"); got != 2 {
		t.Errorf("CountCommand(up) = %d, want 2", got)
	}
}
