package benchenv

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc (USER_HZ, 100 on Linux).
const userHZ = 100

// Machine describes where the numbers come from.
func Machine() string {
	host, _ := os.Hostname()
	model := ""
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := int64(0)
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				mem = kb << 10
			}
		}
	}
	return fmt.Sprintf("%s on %s: %d CPUs (%s), %.1f GiB RAM, %s %s/%s",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), host, runtime.NumCPU(), model,
		float64(mem)/(1<<30), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// LoadAvg is /proc/loadavg's first three fields.
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

type procInfo struct {
	pid, ppid int
	comm      string
	// utime+stime+cutime+cstime: its own CPU and that of its reaped children.
	ticks int64
	// utime+stime: its own CPU only.
	own int64
}

func readProcs() map[int]procInfo {
	out := map[int]procInfo{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 {
			continue
		}
		f := strings.Fields(s[close+1:])
		// f[0] is the state (field 3); ppid is field 4, utime..cstime 14..17.
		if len(f) < 15 {
			continue
		}
		p := procInfo{pid: pid, comm: s[open+1 : close]}
		p.ppid, _ = strconv.Atoi(f[1])
		for _, i := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			p.ticks += v
			if i <= 12 {
				p.own += v
			}
		}
		out[pid] = p
	}
	return out
}

// ours is this process and its descendants.
func ours(procs map[int]procInfo) map[int]bool {
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	mine := map[int]bool{}
	queue := []int{os.Getpid()}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if mine[pid] {
			continue
		}
		mine[pid] = true
		queue = append(queue, children[pid]...)
	}
	return mine
}

func busyTicks() int64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already in user
			break
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return busy
}

// CPUSnapshot is the machine's busy CPU time and this benchmark's share of it
// at one moment.
type CPUSnapshot struct {
	at         time.Time
	busy, mine int64
	own        map[int]procInfo // this benchmark's processes then
}

// TakeCPU snapshots CPU use.
func TakeCPU() CPUSnapshot {
	procs := readProcs()
	mine := ours(procs)
	s := CPUSnapshot{at: time.Now(), busy: busyTicks(), own: map[int]procInfo{}}
	for pid := range mine {
		s.mine += procs[pid].ticks
		s.own[pid] = procs[pid]
	}
	return s
}

// CPUByProcess splits this benchmark's CPU since s by process: the
// long-lived ones by name (kube-apiserver, etcd, each controller, the
// benchmark itself with its Git server), each its own CPU only; what the
// processes that came and went in between used (runners, Pulumi and its
// plugins) is the rest. It says where the time went when the API server or
// etcd, not Pulumi, limits a fleet.
func CPUByProcess(s CPUSnapshot) string {
	now := TakeCPU()
	secs := now.at.Sub(s.at).Seconds()
	if secs <= 0 {
		return ""
	}
	byName := map[string]int64{}
	var named int64
	for pid, p := range now.own {
		before, ok := s.own[pid]
		if !ok || before.comm != p.comm {
			continue // started since s: a runner or Pulumi, in the rest
		}
		byName[p.comm] += p.own - before.own
		named += p.own - before.own
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return byName[names[i]] > byName[names[j]] })
	cores := func(ticks int64) string { return fmt.Sprintf("%.2f", float64(ticks)/userHZ/secs) }
	parts := []string{}
	for _, name := range names {
		if byName[name]*100 < (now.mine - s.mine) { // under 1 %: not worth a column
			continue
		}
		parts = append(parts, name+" "+cores(byName[name]))
	}
	parts = append(parts, "runners and Pulumi (processes that came and went) "+cores(now.mine-s.mine-named))
	return "cores by process: " + strings.Join(parts, ", ")
}

// CPUSince says how busy the machine was since s, split into this
// benchmark's process tree and everything else (a `make test` beside it, say).
func CPUSince(s CPUSnapshot) string {
	now := TakeCPU()
	secs := now.at.Sub(s.at).Seconds()
	if secs <= 0 {
		return ""
	}
	mine := float64(now.mine-s.mine) / userHZ / secs
	other := float64(now.busy-s.busy)/userHZ/secs - mine
	if other < 0 {
		other = 0
	}
	return fmt.Sprintf("CPU over %s: this benchmark (control plane, controller, runners, Pulumi) %.2f cores on average, everything else %.2f cores, of %d",
		time.Duration(secs*float64(time.Second)).Round(time.Second), mine, other, runtime.NumCPU())
}

// OtherProcesses names the processes outside this benchmark that are likely
// to compete with it (Go builds and tests, control planes, controllers,
// Pulumi), with how many of each.
func OtherProcesses() string {
	procs := readProcs()
	mine := ours(procs)
	counts := map[string]int{}
	for pid, p := range procs {
		if mine[pid] {
			continue
		}
		c := p.comm
		switch {
		case c == "go", c == "compile", c == "link", c == "asm", c == "cgo", c == "vet",
			strings.HasSuffix(c, ".test"), strings.HasPrefix(c, "kube-"), c == "etcd",
			strings.HasPrefix(c, "stackpilot"), strings.HasPrefix(c, "pulumi"), c == "git-upload-pack", c == "source-controller":
			counts[c]++
		}
	}
	if len(counts) == 0 {
		return "none"
	}
	names := make([]string, 0, len(counts))
	for c, n := range counts {
		names = append(names, fmt.Sprintf("%s×%d", c, n))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Header prints what, where and what else was running.
func (e *Env) Header(what string) {
	fmt.Fprintf(e.Out, "== %s\n", what)
	fmt.Fprintf(e.Out, "machine: %s\n", Machine())
	fmt.Fprintf(e.Out, "load average (1/5/15 min): %s; other processes now: %s\n", LoadAvg(), OtherProcesses())
}

// CPUUsed is the CPU time used since s: by this benchmark's process tree
// (mine) and by the whole machine (busy, everything included), and the wall
// time between.
func CPUUsed(s CPUSnapshot) (mine, busy, wall time.Duration) {
	now := TakeCPU()
	tick := time.Second / userHZ
	return time.Duration(now.mine-s.mine) * tick, time.Duration(now.busy-s.busy) * tick, now.at.Sub(s.at)
}

// ProcCPU is the CPU time (utime+stime) process pid used itself, its
// threads included and its children (runners, Pulumi) not.
func ProcCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	close := strings.LastIndexByte(s, ')')
	if close < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, i := range []int{11, 12} { // utime, stime (fields 14, 15)
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}
