package testenv

import (
	"os"
	"path/filepath"
)

// SourceController is Flux's source-controller (bin/source-controller, the version pinned by
// SOURCE_CONTROLLER_VERSION) running as a child process against an Env, so tests can check
// that what Stackpilot writes (OCI artifacts, cosign signatures) is what Flux itself accepts.
type SourceController struct {
	*fluxProcess
	// StorageAddr is where it serves artifacts, on 127.0.0.1.
	StorageAddr string
}

// StartSourceController starts bin/source-controller watching every namespace of e, which
// must have been started with Options.FluxCRDs, waits until it is ready and stops it when t
// ends. args are extra flags.
func (e *Env) StartSourceController(t TB, args ...string) *SourceController {
	t.Helper()
	return e.StartSourceControllerIn(t, "", args...)
}

// StartSourceControllerIn is StartSourceController watching namespace alone (every
// namespace when ""), so that tests running at once can each have their own without
// reconciling each other's sources.
func (e *Env) StartSourceControllerIn(t TB, namespace string, args ...string) *SourceController {
	t.Helper()
	dir := t.TempDir()
	s := &SourceController{fluxProcess: newFluxProcess(t, "source-controller", dir)}
	addr, err := FreeAddr()
	if err != nil {
		t.Fatalf("source-controller: %v", err)
	}
	s.StorageAddr = addr
	// It refuses a storage path that does not exist yet.
	if err := os.Mkdir(filepath.Join(dir, "storage"), 0o755); err != nil {
		t.Fatalf("source-controller: %v", err)
	}
	// DOCKER_CONFIG keeps it from reading this machine's registry credentials.
	s.start(t, e, dir, namespace, []string{"DOCKER_CONFIG=" + filepath.Join(dir, "docker")}, append([]string{
		"--storage-addr=" + s.StorageAddr,
		"--storage-adv-addr=" + s.StorageAddr,
		"--storage-path=" + filepath.Join(dir, "storage"),
	}, args...))
	return s
}
