package cluster

import (
	"bufio"
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

	"github.com/stackpilot/stackpilot/internal/procfs"
)

// Down stops the cluster in dir and removes dir. It needs nothing but the
// directory: it works from another process (`make cluster-down`) and after the
// process that ran Up died. A missing dir is not an error.
func Down(dir string, log io.Writer) error {
	if err := Stop(dir, log); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cluster: remove %s: %w", dir, err)
	}
	return nil
}

// Stop ends every process of the cluster in dir, deletes its containers,
// unmounts everything under dir (the Pods' network namespaces too) and deletes
// its bridge, but keeps the files (logs) for a look.
func Stop(dir string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if dir == "/" || len(dir) < 5 {
		return fmt.Errorf("cluster: refusing to clean %q", dir)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// Nothing runs without the directory, but its bridge may be left.
		return removeBridge(dir, log)
	}
	// The kubelet first, so it does not restart what we delete; then every
	// container (runc's state is ours); then containerd and its shims; then the
	// control plane, newest first.
	stopNamed(dir, log, 10*time.Second, "kubelet")
	deleteContainers(dir, log)
	stopNamed(dir, log, 10*time.Second, "containerd")
	killLeftovers(dir, log, shims)
	stopNamed(dir, log, 10*time.Second, "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "registry")
	// What a crash left without a pid file, or that did not stop.
	deleteContainers(dir, log)
	killLeftovers(dir, log, leftoverNames)
	var errs []error
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	// With their mounts gone and no process left in them, the Pods' network
	// namespaces are freed and their veths with them; the bridge is ours to delete.
	if err := removeBridge(dir, log); err != nil {
		errs = append(errs, err)
	}
	removeEmptyCgroupParents()
	return errors.Join(errs...)
}

// deleteContainers force-deletes every container runc knows under the
// cluster's runc root: this kills their processes and removes their cgroups.
func deleteContainers(dir string, log io.Writer) {
	root := filepath.Join(dir, "runc")
	// The CRI runtime keeps one runc root per containerd namespace.
	roots, _ := filepath.Glob(filepath.Join(root, "*"))
	runc, err := exec.LookPath("runc")
	if err != nil {
		return
	}
	for _, r := range append([]string{root}, roots...) {
		if st, err := os.Stat(r); err != nil || !st.IsDir() {
			continue
		}
		out, err := exec.Command(runc, "--root", r, "list", "-q").Output()
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(string(out)) {
			if out, err := exec.Command(runc, "--root", r, "delete", "--force", id).CombinedOutput(); err != nil {
				fmt.Fprintf(log, "cluster: runc delete %s: %v: %s\n", id, err, strings.TrimSpace(string(out)))
			}
		}
	}
}

// leftoverNames are the programs a cluster runs; only they are killed when their
// command line names the cluster's directory (a shell or make whose arguments
// mention it is left alone).
var leftoverNames = map[string]bool{
	"containerd": true, "containerd-shim": true, "containerd-shim-runc-v2": true,
	"kubelet": true, "kube-apiserver": true, "kube-controller-manager": true, "kube-scheduler": true,
	"etcd": true, "stackpilot-cluster": true,
}

var shims = map[string]bool{"containerd-shim": true, "containerd-shim-runc-v2": true}

func killLeftovers(dir string, log io.Writer, names map[string]bool) {
	for _, pid := range processesMentioning(dir) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			continue
		}
		base := strings.TrimSuffix(filepath.Base(exe), " (deleted)")
		if !names[base] || isAncestor(pid) {
			continue
		}
		begin := time.Now()
		start, _ := startTime(pid)
		stopPid(pid, start, 5*time.Second)
		fmt.Fprintf(log, "cluster: stopped leftover %s, pid %d (%s)\n", base, pid, since(begin))
	}
}

// isAncestor reports whether pid is this process or one of its parents.
func isAncestor(pid int) bool {
	for p := os.Getpid(); p > 1; {
		if p == pid {
			return true
		}
		st, err := procfs.ReadStat(p)
		if err != nil {
			return false
		}
		p = st.PPid
	}
	return false
}

// unmountUnder detaches every mount below dir, deepest first: container
// rootfs overlays, sandbox /dev/shm, the kubelet's volume tmpfs, network
// namespaces.
func unmountUnder(dir string) error {
	var last error
	for range 5 {
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				last = fmt.Errorf("cluster: unmount %s: %w", m, err)
			}
		}
	}
	if mounts, _ := mountsUnder(dir); len(mounts) > 0 {
		if last == nil {
			last = fmt.Errorf("cluster: still mounted: %s", strings.Join(mounts, ", "))
		}
		return last
	}
	return nil
}

// mountsUnder lists mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, s.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 is a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeEmptyCgroupParents removes the k8s.io cgroups containerd creates as the
// parent of its containers' (runc delete removes the containers' own). rmdir
// fails on a cgroup that still has processes or children, so another cluster's
// is never touched.
func removeEmptyCgroupParents() {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	for _, d := range dirs {
		_ = syscall.Rmdir(d)
	}
}
