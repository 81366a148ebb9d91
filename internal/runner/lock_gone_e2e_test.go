package runner

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// lockBackend is the lock storage of one DIY backend, read and written
// beside the CLI with the storage's own client, never with the lock store
// under test.
type lockBackend interface {
	// write stores a lock under key as the CLI's Lock does.
	write(key, hostname string, pid int, at time.Time)
	// keys lists the lock keys of every stack.
	keys() []string
	// remove deletes the object (row) under key.
	remove(key string)
}

// cliLock is the content of a lock as the CLI writes it: the JSON of its
// lockContent (pid, username, hostname, timestamp, in that order;
// pkg/backend/diy/lock.go).
func cliLock(t *testing.T, hostname string, pid int, at time.Time) []byte {
	t.Helper()
	content, err := json.Marshal(struct {
		Pid       int       `json:"pid"`
		Username  string    `json:"username"`
		Hostname  string    `json:"hostname"`
		Timestamp time.Time `json:"timestamp"`
	}{pid, "runner", hostname, at})
	if err != nil {
		t.Fatal(err)
	}
	return content
}

// goneLockKey is where a lock of stack dev of project locky lives in a
// backend whose keys all start with prefix (a bucket URL's path, a
// database's name).
func goneLockKey(prefix string) string {
	return prefix + "/.pulumi/locks/organization/locky/dev/6f1c0b52-3c2d-4d5e-9f00-0123456789ab.json"
}

// testStaleLockOfAGonePod: the lock a Job Pod left in the backend when it
// vanished mid-update is removed once the controller says the Pod is gone;
// any other lock stays, and the operation names it (as the CLI names it:
// path, which the message must hold) and how to clear it, and never secret.
// The stack exists already (an up ran).
func testStaleLockOfAGonePod(t *testing.T, e *e2e, b lockBackend, key, path, secret string) {
	t.Helper()
	g := NewWithT(t)
	started := time.Now().Add(-time.Minute)
	const pod = "locky-op-7c9f2-x8k2p"
	gone := &StaleLock{Host: pod, NotBefore: started, HostGone: true}

	// The CLI reads it as one of its locks: it refuses the update with this
	// message only once it has decoded every lock's JSON.
	b.write(key, pod, 4242, time.Now())
	locked := e.run(e.spec(OpUp))
	g.Expect(locked.Outcome).To(Equal(OutcomeConflict), locked.Message)
	g.Expect(locked.ErrorClass).To(Equal(ErrorLocked))
	g.Expect(locked.Message).To(ContainSubstring("the stack is currently locked by 1 lock(s)"))

	spec := e.spec(OpUp)
	spec.StaleLock = gone
	cleared := e.run(spec)
	g.Expect(cleared.Outcome).To(Equal(OutcomeSucceeded), cleared.Message)
	g.Expect(cleared.ClearedLocks).To(Equal(1))
	g.Expect(b.keys()).To(BeEmpty())

	for _, tc := range []struct {
		name     string
		hostname string
		at       time.Time
		req      StaleLock
		why      string
	}{
		{"another host's", "someone-else", time.Now(), *gone, "not by the interrupted operation's host " + pod},
		{"older than the interrupted operation", pod, started.Add(-time.Hour), *gone, "older than the interrupted operation"},
		{"its Pod may still run", pod, time.Now(), StaleLock{Host: pod, NotBefore: started}, "host " + pod + " may still be running"},
	} {
		b.write(key, tc.hostname, 4242, tc.at)
		spec := e.spec(OpUp)
		spec.StaleLock = &tc.req
		res := e.run(spec)
		g.Expect(res.Outcome).To(Equal(OutcomeConflict), tc.name)
		g.Expect(res.ErrorClass).To(Equal(ErrorLocked), tc.name)
		g.Expect(res.ClearedLocks).To(BeZero(), tc.name)
		g.Expect(res.Message).To(ContainSubstring(path), tc.name)
		g.Expect(res.Message).To(ContainSubstring("host "+tc.hostname+", pid 4242"), tc.name)
		g.Expect(res.Message).To(ContainSubstring(tc.why), tc.name)
		g.Expect(res.Message).To(ContainSubstring("pulumi cancel --stack dev"), tc.name)
		if secret != "" {
			g.Expect(res.Message).NotTo(ContainSubstring(secret), tc.name)
		}
		g.Expect(b.keys()).To(ConsistOf(key), tc.name+": kept")
		b.remove(key)
	}
}
