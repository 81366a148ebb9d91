package runner

import (
	"context"
	"net/url"
	"os"
	"strings"
)

// The pulumi CLI keeps the locks of a DIY backend as blobs of its bucket:
// <lockRoot><org>/<project>/<stack>/<lock id>.json, JSON {pid, username,
// hostname, timestamp} (pkg/backend/diy/lock.go). Which store holds the bucket
// depends on the backend URL: a folder (file://), a table (postgres://), an
// object store (s3://, gs://, azblob://). The runner reads and removes those
// blobs itself, from Go, with the backend's own credentials (Spec.Env, as the
// CLI gets them): one pulumi process per operation stays the rule, and a
// `pulumi cancel` would remove every lock of the stack, a live one's too.

// lockStore holds the locks of one stack of a DIY backend.
type lockStore interface {
	// locks lists and reads the stack's locks. A blob that is not a lock the
	// CLI wrote comes back Unreadable, never left out.
	locks(ctx context.Context) ([]lockFile, error)
	// remove deletes one lock that locks returned and says whether it did. A
	// lock already gone, or changed, is left and no error: its writer's own
	// unlock may have come first.
	remove(ctx context.Context, l lockFile) (bool, error)
	close() error
}

// openLockStore opens the lock store of spec's backend, or returns nil for a
// backend whose locks the runner does not clear: Pulumi Cloud, whose
// in-progress updates are the service's (`pulumi cancel` ends them).
func openLockStore(ctx context.Context, spec Spec, project string) (lockStore, error) {
	if dir, ok := fileBackendDir(spec.Backend); ok {
		return fileLockStore{dir: dir, project: project, stackName: spec.StackName}, nil
	}
	switch {
	case strings.HasPrefix(spec.Backend, "postgres://"):
		return openPostgresLocks(ctx, spec, project)
	case strings.HasPrefix(spec.Backend, "s3://"), strings.HasPrefix(spec.Backend, "gs://"), strings.HasPrefix(spec.Backend, "azblob://"):
		return openBucketLocks(ctx, spec, project)
	}
	return nil, nil
}

// fileLockStore is a file:// backend's: one file per lock.
type fileLockStore struct {
	dir, project, stackName string
}

func (s fileLockStore) locks(context.Context) ([]lockFile, error) {
	var locks []lockFile
	for _, path := range fileLocks(s.dir, s.project, s.stackName) {
		locks = append(locks, readLockFile(path))
	}
	return locks, nil
}

func (s fileLockStore) remove(_ context.Context, l lockFile) (bool, error) {
	err := os.Remove(l.Path)
	if os.IsNotExist(err) {
		return false, nil
	}
	return err == nil, err
}

func (fileLockStore) close() error { return nil }

// lockKeyOf says whether key, a blob key of a DIY bucket, is a lock of the
// stack.
func lockKeyOf(key, project, stackName string) bool {
	rel, ok := strings.CutPrefix(key, lockRoot)
	return ok && isStackLock(rel, project, stackName)
}

// bucketPrefix is the folder of a DIY bucket that the CLI keeps everything
// in: the backend URL's path, for every backend but file://
// (pkg/backend/diy/backend.go wraps the bucket in a blob.PrefixedBucket).
func bucketPrefix(u *url.URL) string {
	prefix := strings.TrimLeft(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}

// publicBackend is a backend URL fit for a message: no user, password or
// query (where a password or a key may be), as the CLI's own lock messages
// hide them.
func publicBackend(backend string) string {
	u, err := url.Parse(backend)
	if err != nil {
		return strings.SplitN(backend, "://", 2)[0] + "://"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String()
}
