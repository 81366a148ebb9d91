package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestReadStatSelf(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PPid != os.Getppid() || st.PGrp != syscall.Getpgrp() {
		t.Errorf("parent %d, group %d; want %d, %d", st.PPid, st.PGrp, os.Getppid(), syscall.Getpgrp())
	}
	if st.Ended() {
		t.Errorf("state %q: this process counts as ended", st.State)
	}
	started, err := st.Started()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary started before this line, and not hours ago. Ticks and
	// btime are whole: allow a second each way.
	if now := time.Now(); started.After(now.Add(time.Second)) || started.Before(now.Add(-time.Hour)) {
		t.Errorf("started %s, now %s", started, now)
	}
}

// TestReadStatOddName runs a program whose name holds ") (" and spaces: the
// fields must still be counted from the name's last ')'.
func TestReadStatOddName(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(t.TempDir(), "a) 1 (b")
	if err := os.WriteFile(odd, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := ReadStat(os.Getpid())
	if st.PPid != os.Getpid() || st.StartTicks < self.StartTicks {
		t.Errorf("child stat %+v; want parent %d and a start after ours (%d)", st, os.Getpid(), self.StartTicks)
	}

	// Killed but not yet reaped: a zombie, which has ended.
	_ = cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = ReadStat(cmd.Process.Pid)
		if err == nil && st.Ended() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed child: %+v, %v; want a zombie", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReadStatGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	if _, err := ReadStat(cmd.Process.Pid); err == nil {
		t.Errorf("pid %d of a reaped process still reads", cmd.Process.Pid)
	}
}
