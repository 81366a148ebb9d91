package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/internal/daemon"
	"github.com/stackpilot/stackpilot/internal/procfs"
)

// startProc starts one component with its output in <dir>/logs/<name>.log and
// writes its pid file (<dir>/pids/<name>.pid holds the pid and the process's
// start time, so a recycled pid is never signalled), through which another
// process, such as `make cluster-down`, stops it. A detached process gets its
// own session and outlives the caller; otherwise it is killed when the caller
// dies, and Down or the next Up cleans what it left.
func (c *Cluster) startProc(name string, argv []string, env []string) (*daemon.Process, error) {
	logDir := filepath.Join(c.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), env...)
	start := daemon.Start
	if c.detach {
		start = daemon.StartDetached
	}
	p, err := start(name, cmd, log)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := writePidFile(c.Dir, name, cmd.Process.Pid); err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func pidDir(dir string) string { return filepath.Join(dir, "pids") }

func writePidFile(dir, name string, pid int) error {
	if err := os.MkdirAll(pidDir(dir), 0o755); err != nil {
		return err
	}
	start, err := startTime(pid)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pidDir(dir), name+".pid"), fmt.Appendf(nil, "%d %s\n", pid, start), 0o644)
}

// startTime is when pid started, in clock ticks since boot (see
// internal/procfs): with the pid it names one process for the machine's uptime.
func startTime(pid int) (string, error) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(st.StartTicks, 10), nil
}

// alive reports whether pid still names the process that started at start (a
// zombie counts as gone).
func alive(pid int, start string) bool {
	st, err := procfs.ReadStat(pid)
	if err != nil || st.Ended() {
		return false
	}
	return start == "" || strconv.FormatUint(st.StartTicks, 10) == start
}

// pidFile is one entry of <dir>/pids.
type pidFile struct {
	name  string
	pid   int
	start string
}

func readPidFiles(dir string) []pidFile {
	entries, _ := os.ReadDir(pidDir(dir))
	var out []pidFile
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(pidDir(dir), e.Name()))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) != 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 1 {
			continue
		}
		out = append(out, pidFile{name: strings.TrimSuffix(e.Name(), ".pid"), pid: pid, start: f[1]})
	}
	return out
}

// stopPid sends SIGTERM, waits up to grace, then SIGKILLs. It works on processes
// this process did not start (their parent reaps them, or init does).
func stopPid(pid int, start string, grace time.Duration) {
	if !alive(pid, start) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid, start) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && alive(pid, start); i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// stopNamed stops the named components in order, through their pid files.
func stopNamed(dir string, log io.Writer, grace time.Duration, names ...string) {
	files := readPidFiles(dir)
	for _, name := range names {
		for _, f := range files {
			if f.name == name {
				start := time.Now()
				running := alive(f.pid, f.start)
				stopPid(f.pid, f.start, grace)
				_ = os.Remove(filepath.Join(pidDir(dir), name+".pid"))
				if running {
					fmt.Fprintf(log, "cluster: stopped %s (%s)\n", name, since(start))
				}
			}
		}
	}
}

// processesMentioning lists processes whose command line names dir: whatever a
// crashed cluster left running (containerd shims carry the socket path in theirs).
func processesMentioning(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid <= 1 {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			if mentions(arg, dir) {
				pids = append(pids, pid)
				break
			}
		}
	}
	sort.Ints(pids)
	return pids
}

// mentions reports whether a command-line argument contains the path dir (as a
// whole path element, so /x/cluster does not match /x/cluster2).
func mentions(arg, dir string) bool {
	for i := 0; ; {
		j := strings.Index(arg[i:], dir)
		if j < 0 {
			return false
		}
		end := i + j + len(dir)
		if end == len(arg) || arg[end] == '/' || arg[end] == ',' || arg[end] == ' ' || arg[end] == '"' {
			return true
		}
		i = end
	}
}

var errNotRoot = errors.New("cluster: must run as root (containerd, runc and the kubelet need it)")
