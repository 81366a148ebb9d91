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

// KustomizeController is Flux's kustomize-controller (bin/kustomize-controller, the version
// pinned by KUSTOMIZE_CONTROLLER_VERSION) running as a child process against an Env, so tests
// can check that a Flux Kustomization applying Stack manifests waits on them the way Flux
// users expect. It fetches artifacts from a SourceController's storage over HTTP, through the
// artifact URL source-controller advertises.
type KustomizeController struct {
	cmd  *exec.Cmd
	done chan struct{}
	// LogPath is its log (JSON lines).
	LogPath string
	// HealthAddr and MetricsAddr are its listeners, both on 127.0.0.1.
	HealthAddr, MetricsAddr string
}

// StartKustomizeController installs the Kustomization CRD in e (see InstallKustomizeCRDs),
// starts bin/kustomize-controller watching every namespace, waits until it is ready and stops
// it when t ends. e must have been started with Options.FluxCRDs (it reads the source kinds).
// args are extra flags.
func (e *Env) StartKustomizeController(t TB, args ...string) *KustomizeController {
	t.Helper()
	if err := RequireBinaries(e.BinDir, "kustomize-controller"); err != nil {
		t.Fatalf("%v", err)
	}
	if err := e.InstallKustomizeCRDs(context.Background()); err != nil {
		t.Fatalf("%v", err)
	}
	var addrs [2]string
	for i := range addrs {
		a, err := FreeAddr()
		if err != nil {
			t.Fatalf("kustomize-controller: %v", err)
		}
		addrs[i] = a
	}
	dir := t.TempDir()
	k := &KustomizeController{
		done:        make(chan struct{}),
		LogPath:     filepath.Join(dir, "kustomize-controller.log"),
		HealthAddr:  addrs[0],
		MetricsAddr: addrs[1],
	}
	logFile, err := os.Create(k.LogPath)
	if err != nil {
		t.Fatalf("kustomize-controller: %v", err)
	}
	k.cmd = exec.Command(filepath.Join(e.BinDir, "kustomize-controller"), append([]string{
		"--watch-all-namespaces=true",
		"--health-addr=" + k.HealthAddr,
		"--metrics-addr=" + k.MetricsAddr,
		// Tests run one Kustomization at a time; a failed fetch should surface fast.
		"--http-retry=2",
		"--log-level=debug",
	}, args...)...)
	k.cmd.Dir = dir
	// HOME keeps it from reading this machine's configuration; no cloud provider variables
	// (SOPS key services) are passed on. TMPDIR is where it extracts artifacts.
	k.cmd.Env = []string{
		"KUBECONFIG=" + e.Kubeconfig,
		"HOME=" + dir,
		"TMPDIR=" + dir,
		"RUNTIME_NAMESPACE=default",
		"PATH=" + os.Getenv("PATH"),
	}
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start kustomize-controller: %v", err)
	}
	go func() {
		_ = k.cmd.Wait()
		logFile.Close()
		close(k.done)
	}()
	t.Cleanup(func() { _ = k.Stop() })
	if err := k.waitReady(context.Background(), time.Minute); err != nil {
		t.Fatalf("%v", err)
	}
	return k
}

func (k *KustomizeController) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := hc.Get("http://" + k.HealthAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-k.done:
			return fmt.Errorf("kustomize-controller exited at start (%s); its log, %s:\n%s", k.cmd.ProcessState, k.LogPath, TailFile(k.LogPath, 30))
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("kustomize-controller did not answer http://%s/readyz within %s; its log, %s:\n%s", k.HealthAddr, timeout, k.LogPath, TailFile(k.LogPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop asks kustomize-controller to shut down and kills it if it takes longer than 20s.
func (k *KustomizeController) Stop() error {
	select {
	case <-k.done:
		return nil
	default:
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.done
		return fmt.Errorf("kustomize-controller did not stop within 20s after SIGTERM; killed")
	}
}

// Logs returns the last n lines of its log, for failure messages.
func (k *KustomizeController) Logs(n int) string { return controllerproc.TailFile(k.LogPath, n) }
