package runner

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // s3://, as the CLI opens it
	"gocloud.dev/gcerrors"
)

// An s3:// backend is a gocloud bucket, opened by the CLI from its URL with
// gocloud's s3blob (the bucket is the URL's host; its query sets region,
// endpoint, path style...), after a rewrite of AWS SDK v1-era parameters
// (translateLegacyS3Params), and prefixed by the URL's path. The runner opens
// it the same way, with the same gocloud driver, so it reads the bucket the
// CLI writes.

// bucketLockStore is the lock store of an object-store backend.
type bucketLockStore struct {
	bucket             *blob.Bucket
	where              string // the backend URL without credentials, for messages
	project, stackName string
	restoreEnv         func()
}

func openBucketLocks(ctx context.Context, spec Spec, project string) (lockStore, error) {
	where := publicBackend(spec.Backend)
	env := workspaceEnv(spec)
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	raw, err := translateLegacyS3Params(spec.Backend, getenv)
	if err != nil {
		return nil, fmt.Errorf("stale lock: the backend %s: %w", where, err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("stale lock: the backend URL %s does not parse", where)
	}
	// The SDK reads its credentials, region and profile from the process
	// environment, where the CLI has Env's: so does the runner while it talks
	// to the bucket.
	restore := overlayEnv(env, "AWS_")
	bucket, err := blob.OpenBucket(ctx, raw)
	if err != nil {
		restore()
		return nil, fmt.Errorf("stale lock: open the backend %s: %w", where, scrubURL(err, u))
	}
	if prefix := bucketPrefix(u); prefix != "" {
		bucket = blob.PrefixedBucket(bucket, prefix)
	}
	return &bucketLockStore{bucket: bucket, where: where, project: project, stackName: spec.StackName, restoreEnv: restore}, nil
}

func (s *bucketLockStore) locks(ctx context.Context) ([]lockFile, error) {
	var locks []lockFile
	it := s.bucket.List(&blob.ListOptions{Prefix: lockRoot})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return locks, nil
		}
		if err != nil {
			return nil, fmt.Errorf("stale lock: list the locks of %s: %w", s.where, err)
		}
		if obj.IsDir || !lockKeyOf(obj.Key, s.project, s.stackName) {
			continue
		}
		data, err := s.bucket.ReadAll(ctx, obj.Key)
		if gcerrors.Code(err) == gcerrors.NotFound {
			continue // unlocked since it was listed
		}
		l := parseLock(s.where+"/"+obj.Key, data, err) // as the CLI names it
		l.key, l.content = obj.Key, string(data)
		locks = append(locks, l)
	}
}

// remove deletes the lock's object. An object store offers no delete "only
// while it holds this": none is needed, a lock key being a fresh UUID per CLI
// process, whose process is dead.
func (s *bucketLockStore) remove(ctx context.Context, l lockFile) (bool, error) {
	err := s.bucket.Delete(ctx, l.key)
	switch {
	case gcerrors.Code(err) == gcerrors.NotFound:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("stale lock: remove %s: %w", l.Path, err)
	}
	return true, nil
}

func (s *bucketLockStore) close() error {
	defer s.restoreEnv()
	return s.bucket.Close()
}

// envMu serialises overlayEnv: the process environment is one for all.
var envMu sync.Mutex

// overlayEnv sets the variables of env whose name starts with prefix in the
// process environment, until the returned func restores it. The runner runs
// one operation per process, so nothing else reads the environment then;
// tests that run operations side by side may see the overlay.
func overlayEnv(env map[string]string, prefix string) (restore func()) {
	envMu.Lock()
	type old struct {
		value string
		set   bool
	}
	saved := map[string]old{}
	for k, v := range env {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		was, set := os.LookupEnv(k)
		saved[k] = old{was, set}
		_ = os.Setenv(k, v)
	}
	return sync.OnceFunc(func() {
		for k, o := range saved {
			if o.set {
				_ = os.Setenv(k, o.value)
			} else {
				_ = os.Unsetenv(k)
			}
		}
		envMu.Unlock()
	})
}

// translateLegacyS3Params is the CLI's rewrite of an s3:// URL's AWS SDK
// v1-era query parameters (pkg/backend/diy/backend.go, same name; getenv is
// the CLI's environment): disableSSL becomes disable_https, a scheme-less
// endpoint gets one, and a custom endpoint computes request checksums only
// when required unless told otherwise.
func translateLegacyS3Params(urlstr string, getenv func(string) string) (string, error) {
	u, err := url.Parse(urlstr)
	if err != nil {
		return "", fmt.Errorf("parsing the provided URL: %w", err)
	}
	query := u.Query()
	changed := false

	disableSSL := false
	if values, ok := query["disableSSL"]; ok {
		disableSSL, err = strconv.ParseBool(values[len(values)-1])
		if err != nil {
			return "", fmt.Errorf("invalid value for query parameter %q: %w", "disableSSL", err)
		}
		query.Del("disableSSL")
		if !strings.Contains(query.Get("endpoint"), "://") {
			query.Set("disable_https", strconv.FormatBool(disableSSL))
		}
		changed = true
	}
	if endpoint := query.Get("endpoint"); endpoint != "" {
		if !strings.Contains(endpoint, "://") {
			scheme := "https"
			if disableSSL {
				scheme = "http"
			}
			query.Set("endpoint", scheme+"://"+endpoint)
			changed = true
		}
		if query.Get("request_checksum_calculation") == "" && getenv("AWS_REQUEST_CHECKSUM_CALCULATION") == "" {
			query.Set("request_checksum_calculation", "when_required")
			changed = true
		}
	}
	if !changed {
		return urlstr, nil
	}
	u.RawQuery = query.Encode()
	return u.String(), nil
}
