package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/s3blob" // s3://, as the CLI opens it
	"gocloud.dev/gcerrors"
)

// An object-store backend is a bucket the CLI opens from its URL with gocloud
// and prefixes with the URL's path (pkg/backend/diy/backend.go,
// newDIYBackend):
//   - s3:// with gocloud's s3blob (the bucket is the URL's host; its query
//     sets region, endpoint, path style...), after a rewrite of AWS SDK
//     v1-era parameters (translateLegacyS3Params);
//   - azblob:// with azureblob's default client and service URL options,
//     which read the AZURE_STORAGE_* variables;
//   - gs:// with gcsblob and the CLI's own credentials chain.
// The runner opens s3:// and azblob:// the same way, with the same gocloud
// drivers, so it reads the bucket the CLI writes. A gs:// bucket it reads
// through the Cloud Storage JSON API itself (lock_gcs.go): Google's client
// library would add 27 MB to a binary every runner Pod copies, for three
// calls.

// objectStore is what the lock store needs of a bucket, keys relative to the
// backend's prefix. read and remove return errObjectGone for a key that is
// not there.
type objectStore interface {
	list(ctx context.Context, prefix string) ([]string, error)
	read(ctx context.Context, key string) ([]byte, error)
	remove(ctx context.Context, key string) error
	close() error
}

var errObjectGone = errors.New("no such object")

// bucketLockStore is the lock store of an object-store backend.
type bucketLockStore struct {
	bucket             objectStore
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
	raw := spec.Backend
	if strings.HasPrefix(raw, "s3://") {
		var err error
		if raw, err = translateLegacyS3Params(spec.Backend, getenv); err != nil {
			return nil, fmt.Errorf("stale lock: the backend %s: %w", where, err)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("stale lock: the backend URL %s does not parse", where)
	}
	// The SDKs read their credentials, region, account and endpoints from
	// the process environment, where the CLI has Env's: so does the runner
	// while it talks to the bucket.
	restore := overlayEnv(env, "AWS_", "GOOGLE_", "STORAGE_EMULATOR_HOST", "AZURE_")
	bucket, err := openObjectStore(ctx, u, raw)
	if err != nil {
		restore()
		return nil, fmt.Errorf("stale lock: open the backend %s: %w", where, scrubURL(err, u))
	}
	return &bucketLockStore{bucket: bucket, where: where, project: project, stackName: spec.StackName, restoreEnv: restore}, nil
}

// openObjectStore opens the bucket of an object-store backend URL as the
// CLI does for its scheme.
func openObjectStore(ctx context.Context, u *url.URL, raw string) (objectStore, error) {
	var bucket *blob.Bucket
	var err error
	switch u.Scheme {
	case "gs":
		return openGCS(ctx, u)
	case azureblob.Scheme:
		// Not gocloud's default azblob opener, which refuses a SAS token
		// with a URL that overrides the service endpoint: the CLI registers
		// this one, so a URL the CLI opens opens here too.
		opener := &azureblob.URLOpener{MakeClient: azureblob.NewDefaultClient, ServiceURLOptions: *azureblob.NewDefaultServiceURLOptions()}
		bucket, err = opener.OpenBucketURL(ctx, u)
	default:
		bucket, err = blob.OpenBucket(ctx, raw)
	}
	if err != nil {
		return nil, err
	}
	if prefix := bucketPrefix(u); prefix != "" {
		bucket = blob.PrefixedBucket(bucket, prefix)
	}
	return gocloudStore{bucket}, nil
}

// gocloudStore is a gocloud bucket.
type gocloudStore struct{ bucket *blob.Bucket }

func (g gocloudStore) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := g.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, err
		}
		if !obj.IsDir {
			keys = append(keys, obj.Key)
		}
	}
}

func (g gocloudStore) read(ctx context.Context, key string) ([]byte, error) {
	data, err := g.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, errObjectGone
	}
	return data, err
}

func (g gocloudStore) remove(ctx context.Context, key string) error {
	err := g.bucket.Delete(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return errObjectGone
	}
	return err
}

func (g gocloudStore) close() error { return g.bucket.Close() }

func (s *bucketLockStore) locks(ctx context.Context) ([]lockFile, error) {
	keys, err := s.bucket.list(ctx, lockRoot)
	if err != nil {
		return nil, fmt.Errorf("stale lock: list the locks of %s: %w", s.where, err)
	}
	var locks []lockFile
	for _, key := range keys {
		if !lockKeyOf(key, s.project, s.stackName) {
			continue
		}
		data, err := s.bucket.read(ctx, key)
		if errors.Is(err, errObjectGone) {
			continue // unlocked since it was listed
		}
		l := parseLock(s.where+"/"+key, data, err) // as the CLI names it
		l.key, l.content = key, string(data)
		locks = append(locks, l)
	}
	return locks, nil
}

// remove deletes the lock's object. An object store offers no delete "only
// while it holds this": none is needed, a lock key being a fresh UUID per CLI
// process, whose process is dead.
func (s *bucketLockStore) remove(ctx context.Context, l lockFile) (bool, error) {
	err := s.bucket.remove(ctx, l.key)
	switch {
	case errors.Is(err, errObjectGone):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("stale lock: remove %s: %w", l.Path, err)
	}
	return true, nil
}

func (s *bucketLockStore) close() error {
	defer s.restoreEnv()
	return s.bucket.close()
}

// envMu serialises overlayEnv: the process environment is one for all.
var envMu sync.Mutex

// overlayEnv sets the variables of env whose name starts with one of
// prefixes in the process environment, until the returned func restores it.
// The runner runs one operation per process, so nothing else reads the
// environment then; tests that run operations side by side may see the
// overlay.
func overlayEnv(env map[string]string, prefixes ...string) (restore func()) {
	envMu.Lock()
	type old struct {
		value string
		set   bool
	}
	saved := map[string]old{}
	for k, v := range env {
		if !hasAnyPrefix(k, prefixes) {
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

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
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
