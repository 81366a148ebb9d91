package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/stackpilot/stackpilot/internal/daemon"
)

// startProc starts one component of the control plane with its output in
// <dir>/<name>.log, made fresh on every Start; it dies with this process.
func startProc(dir, name string, argv ...string) (*daemon.Process, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	p, err := daemon.Start(name, cmd, log)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	return p, nil
}
