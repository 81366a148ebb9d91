package runner

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// deadPid is the pid of a process that ran and was reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestStaleVerdict(t *testing.T) {
	since := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	lockAt := since.Add(3 * time.Second)
	req := StaleLock{Host: "ctrl-a", NotBefore: since}
	dead := func(int) (bool, time.Time, bool) { return false, time.Time{}, false }
	aliveSince := func(at time.Time) procInfo {
		return func(int) (bool, time.Time, bool) { return true, at, true }
	}
	lock := func(host string, at time.Time) lockFile {
		return lockFile{Path: "l.json", Pid: 77, Hostname: host, Timestamp: at}
	}
	for _, tc := range []struct {
		name   string
		lock   lockFile
		req    StaleLock
		self   string
		proc   procInfo
		remove bool
	}{
		{"ours, process gone", lock("ctrl-a", lockAt), req, "ctrl-a", dead, true},
		{"ours, process alive: a live update", lock("ctrl-a", lockAt), req, "ctrl-a", aliveSince(since), false},
		{"ours, pid reused by a later process", lock("ctrl-a", lockAt), req, "ctrl-a", aliveSince(lockAt.Add(time.Minute)), true},
		{"ours, alive, start within the slack: kept", lock("ctrl-a", lockAt), req, "ctrl-a", aliveSince(lockAt.Add(time.Second)), false},
		{"ours, alive, start time unknown: kept", lock("ctrl-a", lockAt), req, "ctrl-a", func(int) (bool, time.Time, bool) { return true, time.Time{}, false }, false},
		{"older than the interrupted operation", lock("ctrl-a", since.Add(-time.Second)), req, "ctrl-a", dead, false},
		{"another host", lock("someone", lockAt), req, "ctrl-a", dead, false},
		{"the old Pod, still there", lock("ctrl-a", lockAt), req, "ctrl-b", dead, false},
		{"the old Pod, gone", lock("ctrl-a", lockAt), StaleLock{Host: "ctrl-a", NotBefore: since, HostGone: true}, "ctrl-b", aliveSince(since), true},
		{"HostGone does not free another host's lock", lock("someone", lockAt), StaleLock{Host: "ctrl-a", NotBefore: since, HostGone: true}, "ctrl-b", dead, false},
		{"unreadable", lockFile{Path: "l.json", Unreadable: true}, req, "ctrl-a", dead, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove, why := staleVerdict(tc.lock, tc.req, tc.self, tc.proc)
			NewWithT(t).Expect(remove).To(Equal(tc.remove), why)
			if !remove {
				NewWithT(t).Expect(why).NotTo(BeEmpty())
			}
		})
	}
}

// TestClearStaleLockFiles: real lock files and real processes. Only the lock of
// this host whose process is gone, taken after the interrupted operation
// started, is removed; the others stay and are named in the error.
func TestClearStaleLockFiles(t *testing.T) {
	g := NewWithT(t)
	host, err := os.Hostname()
	g.Expect(err).NotTo(HaveOccurred())
	root := t.TempDir()
	dir := filepath.Join(root, ".pulumi", "locks", "organization", "web", "dev")
	g.Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	since := time.Now().Add(-time.Minute)
	write := func(name, hostname string, pid int, at time.Time) string {
		data, _ := json.Marshal(map[string]any{"pid": pid, "username": "u", "hostname": hostname, "timestamp": at})
		p := filepath.Join(dir, name+".json")
		g.Expect(os.WriteFile(p, data, 0o600)).To(Succeed())
		return p
	}
	oursDead := write("ours-dead", host, deadPid(t), time.Now())
	oursAlive := write("ours-alive", host, os.Getpid(), time.Now()) // this test process runs
	foreign := write("foreign", "another-host", deadPid(t), time.Now())
	older := write("older", host, deadPid(t), since.Add(-time.Hour))

	spec := Spec{Backend: "file://" + root, StackName: "dev", StaleLock: &StaleLock{Host: host, NotBefore: since}}
	n, err := clearStaleLock(context.Background(), spec, "web")
	g.Expect(n).To(Equal(1))
	g.Expect(oursDead).NotTo(BeAnExistingFile())
	for _, p := range []string{oursAlive, foreign, older} {
		g.Expect(p).To(BeAnExistingFile())
	}
	locked, ok := err.(*LockedError)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(locked.Locks).To(HaveLen(3))
	g.Expect(err.Error()).To(ContainSubstring("host another-host"))
	g.Expect(err.Error()).To(ContainSubstring("pulumi cancel --stack dev"))

	// Without a request, or on another backend, nothing is touched.
	n, err = clearStaleLock(context.Background(), Spec{Backend: "file://" + root, StackName: "dev"}, "web")
	g.Expect(n, err).To(Equal(0))
	n, err = clearStaleLock(context.Background(), Spec{Backend: "https://api.pulumi.com", StackName: "dev", StaleLock: spec.StaleLock}, "web")
	g.Expect(n, err).To(Equal(0))
	g.Expect(filepath.Glob(filepath.Join(dir, "*.json"))).To(HaveLen(3))
}

func TestProcStart(t *testing.T) {
	g := NewWithT(t)
	alive, started, known := procStart(os.Getpid())
	g.Expect(alive).To(BeTrue())
	g.Expect(known).To(BeTrue())
	g.Expect(started).To(BeTemporally("<", time.Now()))
	g.Expect(started).To(BeTemporally(">", time.Now().Add(-time.Hour)), "this test process started recently")
	alive, _, _ = procStart(deadPid(t))
	g.Expect(alive).To(BeFalse())
}

func TestClaimValue(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ClaimValue("team-a/net")).To(Equal("team-a/net"))
	long := string(make([]byte, 0, 300))
	for len(long) < 300 {
		long += "x"
	}
	v := ClaimValue("ns/" + long)
	g.Expect(len(v)).To(Equal(maxTagValue))
	g.Expect(ClaimValue("ns/"+long+"y")).NotTo(Equal(v), "still one value per Stack")
}
