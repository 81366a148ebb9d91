package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// MachineLockPath is the lock that lets one in-process cluster at a time run
// on this machine: two kubelets would share the machine's cgroups, its
// containerd-shim names and its 2 cores, and `go test ./...` runs the packages
// that start clusters in parallel. A cluster started by `make cluster-up`
// (detached) does not take it.
const MachineLockPath = "/var/tmp/stackpilot-cluster.lock"

// LockMachine waits until no other process holds MachineLockPath, then holds it
// until unlock is called or this process exits (the kernel drops a flock with
// its file). It says once on log that it waits, and for what.
func LockMachine(ctx context.Context, log io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(MachineLockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: open %s: %w", MachineLockPath, err)
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("cluster: lock %s: %w", MachineLockPath, err)
		}
		if !said && log != nil {
			fmt.Fprintf(log, "cluster: another cluster runs on this machine (%s is held); waiting for it to end\n", MachineLockPath)
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
