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

	"github.com/stackpilot/stackpilot/internal/controllerproc"
)

// SourceController is Flux's source-controller (bin/source-controller, the version pinned by
// SOURCE_CONTROLLER_VERSION) running as a child process against an Env, so tests can check
// that what Stackpilot writes (OCI artifacts, cosign signatures) is what Flux itself accepts.
type SourceController struct {
	cmd  *exec.Cmd
	done chan struct{}
	// LogPath is its log (JSON lines).
	LogPath string
	// HealthAddr, MetricsAddr and StorageAddr are its listeners, all on 127.0.0.1.
	HealthAddr, MetricsAddr, StorageAddr string
}

// StartSourceController starts bin/source-controller watching every namespace of e, which
// must have been started with Options.FluxCRDs, waits until it is ready and stops it when t
// ends. args are extra flags.
func (e *Env) StartSourceController(t TB, args ...string) *SourceController {
	t.Helper()
	if err := RequireBinaries(e.BinDir, "source-controller"); err != nil {
		t.Fatalf("%v", err)
	}
	var addrs [3]string
	for i := range addrs {
		a, err := FreeAddr()
		if err != nil {
			t.Fatalf("source-controller: %v", err)
		}
		addrs[i] = a
	}
	dir := t.TempDir()
	s := &SourceController{
		done:        make(chan struct{}),
		LogPath:     filepath.Join(dir, "source-controller.log"),
		HealthAddr:  addrs[0],
		MetricsAddr: addrs[1],
		StorageAddr: addrs[2],
	}
	// It refuses a storage path that does not exist yet.
	if err := os.Mkdir(filepath.Join(dir, "storage"), 0o755); err != nil {
		t.Fatalf("source-controller: %v", err)
	}
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		t.Fatalf("source-controller: %v", err)
	}
	s.cmd = exec.Command(filepath.Join(e.BinDir, "source-controller"), append([]string{
		"--watch-all-namespaces=true",
		"--health-addr=" + s.HealthAddr,
		"--metrics-addr=" + s.MetricsAddr,
		"--storage-addr=" + s.StorageAddr,
		"--storage-adv-addr=" + s.StorageAddr,
		"--storage-path=" + filepath.Join(dir, "storage"),
		"--log-level=debug",
	}, args...)...)
	s.cmd.Dir = dir
	// HOME and DOCKER_CONFIG keep it from reading this machine's registry credentials; no
	// cloud provider variables are passed on.
	s.cmd.Env = []string{
		"KUBECONFIG=" + e.Kubeconfig,
		"HOME=" + dir,
		"DOCKER_CONFIG=" + filepath.Join(dir, "docker"),
		"RUNTIME_NAMESPACE=default",
		"PATH=" + os.Getenv("PATH"),
	}
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start source-controller: %v", err)
	}
	go func() {
		_ = s.cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(func() { _ = s.Stop() })
	if err := s.waitReady(context.Background(), time.Minute); err != nil {
		t.Fatalf("%v", err)
	}
	return s
}

func (s *SourceController) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := hc.Get("http://" + s.HealthAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("source-controller exited at start (%s); its log, %s:\n%s", s.cmd.ProcessState, s.LogPath, TailFile(s.LogPath, 30))
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("source-controller did not answer http://%s/readyz within %s; its log, %s:\n%s", s.HealthAddr, timeout, s.LogPath, TailFile(s.LogPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop asks source-controller to shut down and kills it if it takes longer than 20s.
func (s *SourceController) Stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		return fmt.Errorf("source-controller did not stop within 20s after SIGTERM; killed")
	}
}

// Logs returns the last n lines of its log, for failure messages.
func (s *SourceController) Logs(n int) string { return controllerproc.TailFile(s.LogPath, n) }
