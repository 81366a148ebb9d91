package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// buildController builds ./cmd/controller into out.
func buildController(ctx context.Context, root, out string) error {
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

type controllerConfig struct {
	binary     string
	toolsDir   string // bin/: pulumi, the plugins, kubectl
	kubeconfig string
	dataDir    string
	logPath    string
	verbose    io.Writer // also gets the log when not nil
}

// controllerProcess is stackpilot-controller running as a child process, as
// users run it: its own process, its own data dir, reaching the API server
// through a kubeconfig.
type controllerProcess struct {
	cmd         *exec.Cmd
	done        chan struct{}
	metricsAddr string
	probeAddr   string
	logPath     string
}

// startController starts the controller and waits until it answers /readyz.
func startController(ctx context.Context, c controllerConfig) (*controllerProcess, error) {
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
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
	logFile, err := os.Create(c.logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.binary,
		"--data-dir="+c.dataDir,
		"--metrics-bind-address="+metrics,
		"--health-probe-bind-address="+probes,
		"--pulumi="+filepath.Join(c.toolsDir, "pulumi"),
	)
	cmd.Dir = c.dataDir
	// KUBECONFIG reaches the runner and, through it, the Kubernetes provider;
	// PulumiEnv puts bin/ first on PATH and keeps Pulumi off the network.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig)
	for k, v := range testenv.PulumiEnv(c.toolsDir) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out io.Writer = logFile
	if c.verbose != nil {
		out = io.MultiWriter(logFile, c.verbose)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that Ctrl-C in the terminal reaches the demo,
	// which stops the controller before the API server; and it dies with the
	// demo if the demo is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start the controller: %w", err)
	}
	p := &controllerProcess{cmd: cmd, done: make(chan struct{}), metricsAddr: metrics, probeAddr: probes, logPath: c.logPath}
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

func (p *controllerProcess) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := hc.Get("http://" + p.probeAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("the controller exited at start (%s); its log, %s:\n%s", p.cmd.ProcessState, p.logPath, tailFile(p.logPath, 30))
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("the controller did not answer http://%s/readyz within %s; its log, %s:\n%s", p.probeAddr, timeout, p.logPath, tailFile(p.logPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Exited is closed when the process has ended.
func (p *controllerProcess) Exited() <-chan struct{} { return p.done }

// Stop asks the controller to shut down (it cancels running operations and
// records them) and kills it if it takes longer than its own grace period.
func (p *controllerProcess) Stop() error {
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

// freeAddr returns a 127.0.0.1 address with a port that was free just now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
