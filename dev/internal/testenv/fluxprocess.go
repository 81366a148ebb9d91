package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/dev/internal/controllerproc"
)

// fluxProcess is one of Flux's controllers (bin/<name>) running as a child
// process against an Env, watching every namespace or one; SourceController
// and KustomizeController add what is their own.
type fluxProcess struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// LogPath is its log (JSON lines).
	LogPath string
	// HealthAddr and MetricsAddr are its listeners, on 127.0.0.1.
	HealthAddr, MetricsAddr string
}

// newFluxProcess picks the listeners and the log path of bin/name in dir;
// start runs it.
func newFluxProcess(t TB, name, dir string) *fluxProcess {
	t.Helper()
	p := &fluxProcess{name: name, done: make(chan struct{}), LogPath: filepath.Join(dir, name+".log")}
	for _, addr := range []*string{&p.HealthAddr, &p.MetricsAddr} {
		a, err := FreeAddr()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		*addr = a
	}
	return p
}

// start runs bin/name from dir with the common flags and args, with HOME
// and TMPDIR in dir (so it reads none of this machine's configuration, and
// no cloud provider variables reach it), waits until it is ready and stops
// it when t ends. It watches namespace alone (Flux's --watch-all-namespaces=false
// watches RUNTIME_NAMESPACE), or every namespace when namespace is "".
func (p *fluxProcess) start(t TB, e *Env, dir, namespace string, env, args []string) {
	t.Helper()
	if err := RequireBinaries(e.BinDir, p.name); err != nil {
		t.Fatalf("%v", err)
	}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	runtimeNamespace := namespace
	if namespace == "" {
		runtimeNamespace = "default"
	}
	p.cmd = exec.Command(filepath.Join(e.BinDir, p.name), append([]string{
		fmt.Sprintf("--watch-all-namespaces=%t", namespace == ""),
		"--health-addr=" + p.HealthAddr,
		"--metrics-addr=" + p.MetricsAddr,
		"--log-level=debug",
	}, args...)...)
	p.cmd.Dir = dir
	p.cmd.Env = append([]string{
		"KUBECONFIG=" + e.Kubeconfig,
		"HOME=" + dir,
		"TMPDIR=" + dir,
		"RUNTIME_NAMESPACE=" + runtimeNamespace,
		"PATH=" + os.Getenv("PATH"),
	}, env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() { _ = p.Stop() })
	if err := p.waitReady(context.Background(), time.Minute); err != nil {
		t.Fatalf("%v", err)
	}
}

func (p *fluxProcess) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := hc.Get("http://" + p.HealthAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start (%s); its log, %s:\n%s", p.name, p.cmd.ProcessState, p.LogPath, TailFile(p.LogPath, 30))
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("%s did not answer http://%s/readyz within %s; its log, %s:\n%s", p.name, p.HealthAddr, timeout, p.LogPath, TailFile(p.LogPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop asks it to shut down and kills it if it takes longer than 20s.
func (p *fluxProcess) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within 20s after SIGTERM; killed", p.name)
	}
}

// Logs returns the last n lines of its log, for failure messages.
func (p *fluxProcess) Logs(n int) string { return controllerproc.TailFile(p.LogPath, n) }
