package runner

import (
	"context"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
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

// fileLocks lists the lock files of a stack in a file:// backend. The CLI keeps
// them in <backend>/.pulumi/locks/<org>/<project>/<stack>/<lock id>.json for
// project-scoped stacks and in .../locks/<stack>/ for legacy ones.
func fileLocks(dir, project, stackName string) []string {
	short := stackName
	if i := strings.LastIndex(short, "/"); i >= 0 {
		short = short[i+1:]
	}
	root := filepath.Join(dir, ".pulumi", "locks")
	var locks []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".json" {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if rel == short || strings.HasSuffix(rel, "/"+project+"/"+short) {
			locks = append(locks, path)
		}
		return nil
	})
	return locks
}

// nothingToCancel matches the service's answer when no update is running.
var nothingToCancel = regexp.MustCompile(`(?i)no (active |current )?update|not currently|nothing to cancel|\b404\b`)

// clearStaleLock removes the locks of an interrupted update with `pulumi cancel`
// and says how many it removed.
//
// Pulumi Cloud: cancel succeeds only when an update was in progress (1 lock).
// file://: the lock files are counted first; should cancel fail, they are removed
// directly. Other DIY backends: cancel removes every lock but cannot say how many,
// so 0 is reported.
func clearStaleLock(ctx context.Context, stack auto.Stack, spec Spec, project string) (int, error) {
	dir, isFile := fileBackendDir(spec.Backend)
	if isFile {
		locks := fileLocks(dir, project, spec.StackName)
		if len(locks) == 0 {
			return 0, nil
		}
		if err := stack.Cancel(ctx); err != nil {
			for _, l := range locks {
				if rmErr := os.Remove(l); rmErr != nil && !os.IsNotExist(rmErr) {
					return 0, err
				}
			}
		}
		return len(locks), nil
	}
	err := stack.Cancel(ctx)
	switch {
	case err == nil && isServiceBackend(spec.Backend):
		return 1, nil
	case err == nil:
		return 0, nil
	case nothingToCancel.MatchString(cliStderr(err)):
		return 0, nil
	default:
		return 0, err
	}
}

func isServiceBackend(backend string) bool {
	return backend == "" || strings.HasPrefix(backend, "https://") || strings.HasPrefix(backend, "http://")
}
