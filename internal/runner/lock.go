package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// fileBackendDir returns the directory of a file:// backend URL, and false for
// any other backend. "file://~" is the user's home, as for the CLI.
func fileBackendDir(backend string) (string, bool) {
	rest, ok := strings.CutPrefix(backend, "file://")
	if !ok {
		return "", false
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 { // query options, like no_tmp_dir
		rest = rest[:i]
	}
	if p, err := url.PathUnescape(rest); err == nil {
		rest = p
	}
	if rest == "~" || strings.HasPrefix(rest, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			rest = filepath.Join(home, strings.TrimPrefix(rest, "~"))
		}
	}
	return filepath.Clean(rest), true
}

// prepareBackend creates the folder of a file:// backend: the CLI refuses to log
// in to a folder that does not exist, and a fresh stack is a normal first run.
func prepareBackend(backend string) error {
	dir, ok := fileBackendDir(backend)
	if !ok {
		return nil
	}
	return os.MkdirAll(dir, 0o700)
}

// fileLocks lists the lock files of a stack in a file:// backend (see
// isStackLock for where the CLI keeps them).
func fileLocks(dir, project, stackName string) []string {
	root := filepath.Join(dir, filepath.FromSlash(lockRoot))
	var locks []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return nil
		}
		if isStackLock(filepath.ToSlash(rel), project, stackName) {
			locks = append(locks, path)
		}
		return nil
	})
	return locks
}

// lockRoot is the folder, or key prefix, of every lock of a DIY backend,
// whatever stores it (pkg/backend/diy/lock.go: .pulumi/locks).
const lockRoot = ".pulumi/locks/"

// isStackLock says whether rel, a lock's slash path under lockRoot, is a lock
// of the stack. The CLI keeps them in <org>/<project>/<stack>/<lock id>.json
// for project-scoped stacks and in <stack>/<lock id>.json for legacy ones.
func isStackLock(rel, project, stackName string) bool {
	short := stackName
	if i := strings.LastIndex(short, "/"); i >= 0 {
		short = short[i+1:]
	}
	if path.Ext(rel) != ".json" {
		return false
	}
	dir := path.Dir(rel)
	return dir == short || strings.HasSuffix(dir, "/"+project+"/"+short)
}

// lockFile is one lock of a DIY backend, as the pulumi CLI writes it
// (pkg/backend/diy/lock.go: pid, username, hostname, timestamp).
type lockFile struct {
	Path      string    `json:"-"`
	Pid       int       `json:"pid"`
	Username  string    `json:"username"`
	Hostname  string    `json:"hostname"`
	Timestamp time.Time `json:"timestamp"`
	// Unreadable is set when the file is not a lock the CLI wrote: nothing is
	// known about it, so it is never removed.
	Unreadable bool `json:"-"`
	// key and content are where a bucket or table holds the lock and what it
	// held when read, in its stored form (a postgres:// store removes the row
	// only while it still holds that).
	key, content string
}

func readLockFile(path string) lockFile {
	data, err := os.ReadFile(path)
	return parseLock(path, data, err)
}

// parseLock decodes the content of a lock, read from where with error err.
func parseLock(where string, data []byte, err error) lockFile {
	l := lockFile{Path: where}
	if err != nil || json.Unmarshal(data, &l) != nil || l.Hostname == "" || l.Pid <= 0 || l.Timestamp.IsZero() {
		return lockFile{Path: where, Unreadable: true}
	}
	return l
}

// procInfo says whether pid runs on this host and, if so, when it started.
type procInfo func(pid int) (alive bool, started time.Time, known bool)

// pidReuseSlack absorbs the imprecision of a process start time read from
// /proc (boot time in whole seconds, clock ticks): a process is taken as a
// reuse of the lock's pid only when it started clearly after the lock.
const pidReuseSlack = 2 * time.Second

// staleVerdict says whether the lock l may be removed at req's request by a
// runner on host self, and why not when it may not. It is the whole rule:
// ours (host and time) and provably dead, or kept.
func staleVerdict(l lockFile, req StaleLock, self string, proc procInfo) (remove bool, why string) {
	switch {
	case l.Unreadable:
		return false, "it is not a lock file the pulumi CLI wrote"
	case l.Hostname != req.Host:
		return false, fmt.Sprintf("it was taken on host %s, not by the interrupted operation's host %s", l.Hostname, req.Host)
	case l.Timestamp.Before(req.NotBefore):
		return false, fmt.Sprintf("it is older than the interrupted operation (started %s)", req.NotBefore.UTC().Format(time.RFC3339))
	case l.Hostname != self:
		if req.HostGone {
			return true, ""
		}
		return false, fmt.Sprintf("host %s may still be running", l.Hostname)
	}
	alive, started, known := proc(l.Pid)
	switch {
	case !alive:
		return true, ""
	case known && started.After(l.Timestamp.Add(pidReuseSlack)):
		return true, "" // the pid was reused by a later process
	}
	return false, fmt.Sprintf("process %d still runs on this host", l.Pid)
}

// LockedError is a stack lock that the runner will not remove: it is not
// provably a dead operation's of this controller.
type LockedError struct {
	StackName string
	Locks     []string // one line per lock: file, host, pid, time, why it stays
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("stack %s is locked and the lock is not provably stale: %s. If no pulumi process holds it any more, "+
		"clear it by hand (`pulumi cancel --stack %s` against the backend, or remove the lock file); the next reconcile then proceeds",
		e.StackName, strings.Join(e.Locks, "; "), e.StackName)
}

func describeLock(l lockFile, why string) string {
	if l.Unreadable {
		return fmt.Sprintf("%s (%s)", l.Path, why)
	}
	return fmt.Sprintf("%s (host %s, pid %d, since %s: %s)", l.Path, l.Hostname, l.Pid, l.Timestamp.UTC().Format(time.RFC3339), why)
}

// clearStaleLock removes the locks of a dead operation of this controller from
// a DIY backend (file://, postgres://, s3://: lockstore.go) and says how
// many it removed. A lock it may not remove fails with a
// LockedError naming it: the engine would stop on it anyway, with less to say.
// It never runs `pulumi cancel`, which on a DIY backend deletes every lock of
// the stack, a live update's included. Other backends are not touched (see
// openLockStore), and the engine reports their locks.
func clearStaleLock(ctx context.Context, spec Spec, project string) (int, error) {
	if spec.StaleLock == nil {
		return 0, nil
	}
	store, err := openLockStore(ctx, spec, project)
	if err != nil || store == nil {
		return 0, err
	}
	defer store.close()
	self, err := os.Hostname()
	if err != nil {
		return 0, fmt.Errorf("host name: %w", err)
	}
	locks, err := store.locks(ctx)
	if err != nil {
		return 0, err
	}
	removed := 0
	var kept []string
	for _, l := range locks {
		ok, why := staleVerdict(l, *spec.StaleLock, self, procStart)
		if !ok {
			kept = append(kept, describeLock(l, why))
			continue
		}
		ok, err := store.remove(ctx, l)
		if err != nil {
			return removed, err
		}
		if ok {
			removed++
		}
	}
	if len(kept) > 0 {
		return removed, &LockedError{StackName: spec.StackName, Locks: kept}
	}
	return removed, nil
}
