package benchenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// Controller is stackpilot-controller running as a child process
// (testenv.StartController), limited to one namespace, with its data dir and
// log in the run's directory.
type Controller struct {
	*testenv.ControllerProcess
}

// StartController runs the controller for namespace ns and waits until it
// answers /readyz. Extra args go to the controller (--concurrent-operations=2).
func (e *Env) StartController(ctx context.Context, ns string, args ...string) (*Controller, error) {
	return e.StartNamedController(ctx, "controller", ns, args...)
}

// StartNamedController is StartController for one of several controllers
// (the shards of a fleet): its data dir is <Tmp>/<name>-data and its log
// <Tmp>/<name>.log.
func (e *Env) StartNamedController(ctx context.Context, name, ns string, args ...string) (*Controller, error) {
	var verbose io.Writer
	if e.Verbose {
		verbose = os.Stderr
	}
	p, err := testenv.StartController(ctx, testenv.ControllerConfig{
		Binary:     e.ControllerBin,
		BinDir:     e.Bin,
		Kubeconfig: e.Kube.Kubeconfig,
		DataDir:    filepath.Join(e.Tmp, name+"-data"),
		LogPath:    filepath.Join(e.Tmp, name+".log"),
		Verbose:    verbose,
		Args:       append([]string{"--watch-namespace=" + ns}, args...),
	})
	if err != nil {
		return nil, err
	}
	e.defer_(func() { _ = p.Stop() })
	e.Logf("%s running: pid %d, metrics http://%s/metrics, log %s", name, p.Pid(), p.MetricsAddr, p.LogPath)
	return &Controller{p}, nil
}

// Memory is the controller's memory as the kernel and the Go runtime see it.
type Memory struct {
	// RSS and HWM (peak RSS) from /proc/<pid>/status, in bytes.
	RSS, HWM int64
	// From the metrics endpoint: go_memstats_heap_inuse_bytes,
	// go_memstats_heap_alloc_bytes, go_memstats_sys_bytes, go_goroutines;
	// -1 when not read.
	HeapInuse, HeapAlloc, GoSys, Goroutines float64
}

func (m Memory) String() string {
	s := fmt.Sprintf("RSS %s, peak RSS (VmHWM) %s", MiB(m.RSS), MiB(m.HWM))
	if m.HeapInuse >= 0 {
		s += fmt.Sprintf(", Go heap in use %s (allocated %s), Go sys %s, goroutines %.0f",
			MiB(int64(m.HeapInuse)), MiB(int64(m.HeapAlloc)), MiB(int64(m.GoSys)), m.Goroutines)
	}
	return s
}

// MiB formats bytes as mebibytes.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Memory reads /proc/<pid>/status and the metrics endpoint.
func (c *Controller) Memory() (Memory, error) {
	m := Memory{HeapInuse: -1, HeapAlloc: -1, GoSys: -1, Goroutines: -1}
	status, err := ProcStatus(c.Pid())
	if err != nil {
		return m, err
	}
	m.RSS, m.HWM = status["VmRSS"], status["VmHWM"]
	var values [4]float64
	for i, name := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "go_goroutines"} {
		if values[i], err = c.Metric(name); err != nil {
			return m, nil // the Go numbers stay -1
		}
	}
	m.HeapInuse, m.HeapAlloc, m.GoSys, m.Goroutines = values[0], values[1], values[2], values[3]
	return m, nil
}

// ProcStatus returns the kB fields of /proc/<pid>/status (VmRSS, VmHWM...) in bytes.
func ProcStatus(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 2 && fields[1] == "kB" {
			if v, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
				out[name] = v << 10
			}
		}
	}
	return out, sc.Err()
}

// Counters reads the controller's Pulumi operations
// (stackpilot_operations_total) and reconciles
// (controller_runtime_reconcile_total) so far, all kinds and results summed.
func (c *Controller) Counters() (operations, reconciles float64, err error) {
	if operations, err = c.Metric("stackpilot_operations_total"); err != nil {
		return 0, 0, err
	}
	if reconciles, err = c.Metric("controller_runtime_reconcile_total"); err != nil {
		return 0, 0, err
	}
	return operations, reconciles, nil
}

// ConcurrencyArgs is the controller flag for n concurrent operations, none
// for n <= 0 (the controller's default).
func ConcurrencyArgs(n int) []string {
	if n <= 0 {
		return nil
	}
	return []string{fmt.Sprintf("--concurrent-operations=%d", n)}
}

// PulumiArgs points the controller at a wrapper in front of bin/pulumi; it
// comes after testenv's own --pulumi, and the last one wins.
func PulumiArgs(w *Wrapper) []string { return []string{"--pulumi=" + w.Pulumi()} }
