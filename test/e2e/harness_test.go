package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

var (
	buildOnce     sync.Once
	controllerBin string
	buildErr      error
)

// controllerBinary builds cmd/controller once per test run: the e2e tests run the
// controller as users do, as its own process, so that it can be killed.
func controllerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stackpilot-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		controllerBin = filepath.Join(dir, "stackpilot-controller")
		cmd := exec.Command("go", "build", "-o", controllerBin, "./cmd/controller")
		cmd.Dir = env.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/controller: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return controllerBin
}

// controllerProcess is a running stackpilot-controller limited to one namespace.
type controllerProcess struct {
	cmd         *exec.Cmd
	done        chan struct{}
	metricsAddr string
	logPath     string
}

// startController runs the controller for namespace ns with data in dataDir.
func startController(t testing.TB, ns, dataDir string, extraArgs ...string) *controllerProcess {
	t.Helper()
	metrics, probes := freePort(t), freePort(t)
	logPath := filepath.Join(dataDir, fmt.Sprintf("controller-%d.log", time.Now().UnixNano()))
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--watch-namespace=" + ns,
		"--data-dir=" + dataDir,
		"--metrics-bind-address=" + metrics,
		"--health-probe-bind-address=" + probes,
		"--pulumi=" + filepath.Join(env.BinDir, "pulumi"),
	}, extraArgs...)
	cmd := exec.Command(controllerBinary(t), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	for k, v := range testenv.PulumiEnv(env.BinDir) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &controllerProcess{cmd: cmd, done: make(chan struct{}), metricsAddr: metrics, logPath: logPath}
	go func() { _ = cmd.Wait(); logFile.Close(); close(c.done) }()
	t.Cleanup(c.Stop)
	return c
}

// Kill ends the controller at once, as a crash or an OOM kill would.
func (c *controllerProcess) Kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// Stop asks the controller to shut down and waits.
func (c *controllerProcess) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(40 * time.Second):
		c.Kill()
	}
}

// Logs returns everything the controller wrote so far.
func (c *controllerProcess) Logs(t testing.TB) string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Operations sums stackpilot_operations_total (runner processes started) for
// the given operation type, or all types when typ is "".
func (c *controllerProcess) Operations(t testing.TB, typ string) int {
	t.Helper()
	resp, err := http.Get("http://" + c.metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "stackpilot_operations_total{") {
			continue
		}
		if typ != "" && !strings.Contains(line, `type="`+typ+`"`) {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		total += int(v)
	}
	return total
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
