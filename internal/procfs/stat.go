// Package procfs reads what this project needs of Linux's /proc about a
// process: its state, its parent and process group, and when it started. A pid alone may name a
// different process after the first one ended (pids are reused); the pid with
// its start time names one process for the machine's uptime, which is how the
// cluster's pid files and the runner's lock holders tell a live owner from a
// recycled pid. It is small and has no dependencies, so the runner can use it.
package procfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stat is the part of /proc/<pid>/stat this project reads.
type Stat struct {
	// State is field 3: "R", "S", "D", "Z" (a zombie: ended, not yet reaped)...
	State string
	// PPid is field 4, the parent's pid; PGrp field 5, the process group.
	PPid, PGrp int
	// StartTicks is field 22: when the process started, in clock ticks
	// (USER_HZ) after boot.
	StartTicks uint64
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports (the kernel fixes it for user space).
const clockTicks = 100

// ReadStat parses /proc/<pid>/stat. The command name (field 2) may hold spaces
// and parentheses, so the fields are counted from its last ')'.
func ReadStat(pid int) (Stat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("procfs: malformed /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state), so field n is f[n-3].
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("procfs: short /proc/%d/stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, fmt.Errorf("procfs: malformed /proc/%d/stat: %w", pid, err)
	}
	return Stat{State: f[0], PPid: ppid, PGrp: pgrp, StartTicks: start}, nil
}

// Ended says whether the process has ended though its pid is still taken: a
// zombie (Z) its parent has not reaped yet, or one being torn down (X). An
// orphan killed in a container may never be reaped, so "it has a pid" is not
// "it runs".
func (s Stat) Ended() bool { return s.State == "Z" || s.State == "X" }

// Started is the wall-clock time the process started: the boot time plus
// StartTicks. It moves if the system clock is set, so compare it with some
// slack, or compare StartTicks when both sides read them.
func (s Stat) Started() (time.Time, error) {
	boot, err := bootTime()
	if err != nil {
		return time.Time{}, err
	}
	return boot.Add(time.Duration(s.StartTicks) * time.Second / clockTicks), nil
}

// bootTime is the "btime" line of /proc/stat, in seconds since the epoch.
func bootTime() (time.Time, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("procfs: /proc/stat btime: %w", err)
			}
			return time.Unix(sec, 0), nil
		}
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Time{}, errors.New("procfs: no btime in /proc/stat")
}
