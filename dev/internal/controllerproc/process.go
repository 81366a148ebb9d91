// Package controllerproc builds stackpilot-controller from a source checkout
// and runs it as a child process, the way a user runs it outside a cluster:
// its own process, data dir and log, reaching the API server through a
// kubeconfig, with the pinned Pulumi tools. The demo runs the controller so,
// and so do the end-to-end tests (through internal/testenv), which can kill
// it like a crash would.
package controllerproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/internal/daemon"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/toolchain"
)

// Build builds ./cmd/controller of the repository at root into out.
func Build(ctx context.Context, root, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/controller")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/controller: %v\n%s", err, output)
	}
	return nil
}

// Config says how to run stackpilot-controller as a child process.
type Config struct {
	Binary     string
	BinDir     string // the pinned tools: pulumi and its plugins
	Kubeconfig string
	DataDir    string
	LogPath    string    // default: <DataDir>/controller-<time>.log
	Verbose    io.Writer // also gets the log when not nil
	Args       []string  // extra flags, e.g. --watch-namespace
	// Env is added to the process's environment, e.g. POD_NAME for a
	// replica that stands for a Pod.
	Env []string
	// ProbeAddr is the /healthz and /readyz address (default: a free one):
	// fixed when a restarted process must answer where the first did.
	ProbeAddr string
}

// Process is stackpilot-controller running as a child process.
type Process struct {
	cmd         *exec.Cmd
	done        chan struct{}
	MetricsAddr string
	ProbeAddr   string
	// WebhookAddr is where the Receivers' webhooks are served
	// (http://WebhookAddr/hook/...).
	WebhookAddr string
	// LogsAddr is the HTTPS listener of the engine logs and the full plans
	// (https://LogsAddr/logs/..., /plans/...; a self-signed certificate).
	LogsAddr string
	// DashboardAddr is the web dashboard's HTTPS listener
	// (https://DashboardAddr/; the logs' certificate).
	DashboardAddr string
	LogPath       string
}

// Start starts the controller and waits until it answers /readyz. A
// controller that exits at start because one of its ports was taken in the
// moment between FreeAddr and its bind (another test process's daemon got
// there first: FreePort can only make that rare) is started again on other
// ports, up to three times.
func Start(ctx context.Context, c Config) (*Process, error) {
	for attempt := 1; ; attempt++ {
		p, err := start(ctx, c)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) {
			return p, err
		}
		c.LogPath = "" // a new log for the new try; the old one stays
	}
}

// errPortTaken marks a start that failed on a port another process took.
var errPortTaken = errors.New("a port was taken")

func start(ctx context.Context, c Config) (*Process, error) {
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	probes := c.ProbeAddr
	if probes == "" {
		if probes, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	webhooks, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	logs, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	dash, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	if c.LogPath == "" {
		c.LogPath = filepath.Join(c.DataDir, fmt.Sprintf("controller-%d.log", time.Now().UnixNano()))
	}
	logFile, err := os.Create(c.LogPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--data-dir=" + c.DataDir,
		"--metrics-bind-address=" + metrics,
		"--health-probe-bind-address=" + probes,
		"--webhook-bind-address=" + webhooks,
		"--logs-bind-address=" + logs,
		"--dashboard-bind-address=" + dash,
		"--pulumi=" + filepath.Join(c.BinDir, "pulumi"),
	}, c.Args...)
	cmd := exec.Command(c.Binary, args...)
	cmd.Dir = c.DataDir
	// KUBECONFIG reaches the runner and, through it, the Kubernetes provider;
	// PulumiEnv puts bin/ first on PATH and keeps Pulumi off the network.
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+c.Kubeconfig), c.Env...)
	for k, v := range toolchain.PulumiEnv(c.BinDir) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out io.Writer = logFile
	if c.Verbose != nil {
		out = io.MultiWriter(logFile, c.Verbose)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that Ctrl-C in a terminal reaches the parent
	// first; and it dies with the parent if the parent is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start the controller: %w", err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), MetricsAddr: metrics, ProbeAddr: probes, WebhookAddr: webhooks, LogsAddr: logs, DashboardAddr: dash, LogPath: c.LogPath}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := p.waitReady(ctx, 2*time.Minute); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Process) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := hc.Get("http://" + p.ProbeAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			tail := TailFile(p.LogPath, 30)
			err := fmt.Errorf("the controller exited at start (%s); its log, %s:\n%s", p.cmd.ProcessState, p.LogPath, tail)
			if strings.Contains(tail, "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("the controller did not answer http://%s/readyz within %s; its log, %s:\n%s", p.ProbeAddr, timeout, p.LogPath, TailFile(p.LogPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Pid is the controller's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Kill ends the controller at once, as a crash or an OOM kill would (its runner
// notices and kills its own Pulumi processes).
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// KillTree ends the controller and every process below it at once, as the
// death of its container does (SIGKILL, OOM, a lost node): its runners and
// their pulumi CLIs die in the same instant as the controller, none alive to
// notice and clean up, and the stack locks they held stay in the backend.
// Kill, by contrast, leaves the runners to notice their parent gone.
func (p *Process) KillTree() {
	runner.KillProcessTree(p.cmd.Process.Pid)
	<-p.done
}

// Stop asks the controller to shut down and kills its process group if it takes
// longer than 45s.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(45 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("the controller did not stop within 45s after SIGTERM; killed")
	}
}

// Logs returns everything the controller wrote so far.
func (p *Process) Logs() (string, error) {
	data, err := os.ReadFile(p.LogPath)
	return string(data), err
}

// Metric sums the samples of a metric whose label set contains every one of
// labels (`type="up"`), from the controller's metrics endpoint.
func (p *Process) Metric(name string, labels ...string) (float64, error) {
	return Metric(p.MetricsAddr, name, labels...)
}

// Metric is Process.Metric for the metrics endpoint at addr (host:port), of
// a controller this package did not start (a Pod on the host's network).
func Metric(addr, name string, labels ...string) (float64, error) {
	total, _, err := scrape(addr, name, labels)
	return total, err
}

// Series counts the samples Metric would sum: whether a controller has a
// series at all (a gauge at 0 is still one).
func Series(addr, name string, labels ...string) (int, error) {
	_, n, err := scrape(addr, name, labels)
	return n, err
}

func scrape(addr, name string, labels []string) (total float64, n int, err error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if !containsAll(line, labels) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		total += v
		n++
	}
	return total, n, sc.Err()
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// FreeAddr returns a 127.0.0.1 address with a port that was free just now
// (daemon.FreePort says why it is not the kernel's ":0" choice).
func FreeAddr() (string, error) {
	port, err := daemon.FreePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}

// TailFile returns the last n lines of a file, for error messages.
func TailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return cluster.Tail(string(data), n)
}
