package runner

import (
	"os"
	"strconv"
	"syscall"

	"github.com/stackpilot/stackpilot/internal/procfs"
)

// KillProcessTree SIGKILLs root, every process descending from it, and every
// process group led by one of them; root may be the calling process itself.
//
// Why more than kill(-pgid): the pulumi CLI starts each plugin (language host,
// providers) in a process group of its own, so killing the runner's group alone
// leaves the plugins running until they notice the engine is gone, minutes later.
// Groups are killed only when their leader is in the tree, so nothing outside it
// is touched.
func KillProcessTree(root int) {
	self := os.Getpid()
	rootLeads := pgidOf(root) == root
	if root != self && rootLeads {
		// Freeze the runner and the CLI first: stopped processes start no plugins
		// while the tree is read.
		_ = syscall.Kill(-root, syscall.SIGSTOP)
	}
	killBelow(root)
	if rootLeads {
		_ = syscall.Kill(-root, syscall.SIGKILL)
	} else {
		_ = syscall.Kill(root, syscall.SIGKILL)
	}
}

// KillDescendants SIGKILLs every process below the calling one, and the process
// groups they lead, but not the caller: what the pulumi CLI left running (a
// plugin it lost track of, or one orphaned when the CLI was killed) dies before
// the runner exits.
func KillDescendants() { killBelow(os.Getpid()) }

// killBelow stops, then kills, every process descending from root and every
// process group led by one of them; never the calling process.
func killBelow(root int) {
	self := os.Getpid()
	tree := map[int]proc{}
	for pass := 0; pass < 2; pass++ { // the second pass catches children forked during the first
		for _, p := range descendants(readProcs(), root) {
			tree[p.pid] = p
			if p.pid != self {
				_ = syscall.Kill(p.pid, syscall.SIGSTOP)
			}
		}
	}
	for _, p := range tree {
		if p.pid == self {
			continue
		}
		if p.pgid == p.pid {
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// BecomeSubreaper makes the orphans of the caller's descendants its children
// rather than init's: a plugin whose pulumi CLI died stays in the runner's tree,
// where KillProcessTree and KillDescendants find it.
func BecomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

type proc struct{ pid, ppid, pgid int }

// readProcs reads pid, parent and process group of every process from /proc.
func readProcs() map[int]proc {
	procs := map[int]proc{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return procs
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			procs[pid] = p
		}
	}
	return procs
}

// readProc reads pid's parent and process group from /proc/<pid>/stat.
func readProc(pid int) (proc, bool) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: st.PPid, pgid: st.PGrp}, true
}

func pgidOf(pid int) int {
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		return -1
	}
	return pgid
}

// descendants returns the processes below root (not root itself).
func descendants(procs map[int]proc, root int) []proc {
	children := map[int][]proc{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []proc
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !seen[c.pid] {
				seen[c.pid] = true
				out = append(out, c)
				queue = append(queue, c.pid)
			}
		}
	}
	return out
}

// ProcessAlive is false for a process that is gone or a zombie: an orphan killed
// in a container may never be reaped, so "it has a PID" is not "it runs".
func ProcessAlive(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && !st.Ended()
}
