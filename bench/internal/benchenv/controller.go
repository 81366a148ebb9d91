package benchenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Controller is stackpilot-controller running as a child process, limited to
// one namespace, with its own data dir.
type Controller struct {
	cmd         *exec.Cmd
	done        chan struct{}
	MetricsAddr string
	probeAddr   string
	LogPath     string
	DataDir     string
}

// StartController runs the controller for namespace ns and waits until it
// answers /readyz. Extra args go to the controller (--concurrent-operations=2).
func (e *Env) StartController(ctx context.Context, ns string, args ...string) (*Controller, error) {
	dataDir := filepath.Join(e.Tmp, "controller-data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	probes, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(e.Tmp, "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.ControllerBin, append([]string{
		"--watch-namespace=" + ns,
		"--data-dir=" + dataDir,
		"--metrics-bind-address=" + metrics,
		"--health-probe-bind-address=" + probes,
		"--pulumi=" + filepath.Join(e.Bin, "pulumi"),
	}, args...)...)
	cmd.Dir = dataDir
	cmd.Env = e.PulumiEnv()
	var out io.Writer = logFile
	if e.Verbose {
		out = io.MultiWriter(logFile, os.Stderr)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start the controller: %w", err)
	}
	c := &Controller{cmd: cmd, done: make(chan struct{}), MetricsAddr: metrics, probeAddr: probes, LogPath: logPath, DataDir: dataDir}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	e.defer_(c.Stop)
	if err := c.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	e.Logf("controller running: pid %d, metrics http://%s/metrics, log %s", c.Pid(), metrics, logPath)
	return c, nil
}

// Pid is the controller's process ID.
func (c *Controller) Pid() int { return c.cmd.Process.Pid }

func (c *Controller) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := hc.Get("http://" + c.probeAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.done:
			return fmt.Errorf("the controller exited at start (%s); see %s", c.cmd.ProcessState, c.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("the controller did not answer /readyz within %s; see %s", timeout, c.LogPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Exited is closed once the controller has ended.
func (c *Controller) Exited() <-chan struct{} { return c.done }

// Stop sends SIGTERM and kills the process group after 45s.
func (c *Controller) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(45 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
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
	if metrics, err := c.Metrics(); err == nil {
		m.HeapInuse = metrics.Value("go_memstats_heap_inuse_bytes", "")
		m.HeapAlloc = metrics.Value("go_memstats_heap_alloc_bytes", "")
		m.GoSys = metrics.Value("go_memstats_sys_bytes", "")
		m.Goroutines = metrics.Value("go_goroutines", "")
	}
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

// Metrics is one scrape of the Prometheus text format: each sample line's
// name{labels} and value.
type Metrics []Sample

// Sample is one line of a scrape.
type Sample struct {
	Name, Labels string
	Value        float64
}

// Metrics scrapes the controller's metrics endpoint.
func (c *Controller) Metrics() (Metrics, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + c.MetricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	var out Metrics
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		series := line[:i]
		name, labels := series, ""
		if j := strings.IndexByte(series, '{'); j >= 0 {
			name, labels = series[:j], series[j:]
		}
		out = append(out, Sample{Name: name, Labels: labels, Value: v})
	}
	return out, sc.Err()
}

// Value sums the samples named name whose labels contain every
// comma-separated label in match (`type="up"`), or all of them when match is
// empty. It is 0 when there is none.
func (m Metrics) Value(name, match string) float64 {
	total := 0.0
	for _, s := range m {
		if s.Name != name {
			continue
		}
		ok := true
		if match != "" {
			for _, l := range strings.Split(match, ",") {
				if !strings.Contains(s.Labels, l) {
					ok = false
				}
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
