package receiver

import (
	"testing"
	"time"
)

func TestReplayCache(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newReplayCache()
	c.now = func() time.Time { return now }
	if c.seenBefore("a") {
		t.Fatal("first delivery seen as a replay")
	}
	now = now.Add(ReplayWindow - time.Second)
	if !c.seenBefore("a") {
		t.Fatal("a redelivery within the window was not a replay")
	}
	if c.seenBefore("b") {
		t.Fatal("another id seen as a replay")
	}
	now = now.Add(2 * time.Second)
	if c.seenBefore("a") {
		t.Fatal("a delivery older than the window is still remembered")
	}
	c.forget("b")
	if c.seenBefore("b") {
		t.Fatal("a forgotten id is still a replay")
	}
	now = now.Add(2 * ReplayWindow)
	c.seenBefore("c")
	if len(c.seen) != 1 || len(c.order) != 1 {
		t.Fatalf("expired ids are kept: %d seen, %d in order", len(c.seen), len(c.order))
	}
}

func TestReplayKey(t *testing.T) {
	body := []byte(`{"events":[{"id":"1","action":"push"}]}`)
	if replayKey("ns/r", body) != replayKey("ns/r", append([]byte(nil), body...)) {
		t.Error("the same body is not the same delivery")
	}
	if replayKey("ns/r", body) == replayKey("ns/r", append(body, ' ')) {
		t.Error("another body is the same delivery")
	}
	if replayKey("ns/r", body) == replayKey("ns/other", body) {
		t.Error("one Receiver's delivery is another's replay")
	}
}
