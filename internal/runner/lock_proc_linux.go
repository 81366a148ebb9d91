package runner

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports (the kernel fixes it for user space).
const clockTicks = 100

// procStart reports whether pid runs (a zombie does not) and when it started,
// from /proc/<pid>/stat field 22 (start time in ticks after boot) and the boot
// time in /proc/stat. known is false when the start time cannot be read.
func procStart(pid int) (alive bool, started time.Time, known bool) {
	if !ProcessAlive(pid) {
		return false, time.Time{}, false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true, time.Time{}, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return true, time.Time{}, false
	}
	// Fields after the command name start with field 3 (state): 22 is index 19.
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 20 {
		return true, time.Time{}, false
	}
	ticks, err := strconv.ParseInt(string(fields[19]), 10, 64)
	boot, ok := bootTime()
	if err != nil || !ok {
		return true, time.Time{}, false
	}
	return true, boot.Add(time.Duration(ticks) * time.Second / clockTicks), true
}

func bootTime() (time.Time, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(sec, 0), err == nil
		}
	}
	return time.Time{}, false
}
