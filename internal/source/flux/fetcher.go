package flux

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/source"
)

const (
	// DefaultMaxSize bounds a downloaded artifact and the files in it.
	DefaultMaxSize = 100 << 20
	// DefaultAttempts is how many times a download is tried before the
	// reconcile fails (and backs off).
	DefaultAttempts = 3
	// DefaultTimeout bounds one download.
	DefaultTimeout = 5 * time.Minute
)

// Fetcher downloads source artifacts into the artifact store, once per
// digest: a digest names immutable content, so a tarball fetched before
// (by any Stack) is served from the store. Concurrent fetches of one
// digest share one download. A Fetcher is safe for concurrent use.
type Fetcher struct {
	// HTTP is the client used to download; nil is http.DefaultClient.
	HTTP *http.Client
	// MaxSize bounds the tarball (its announced size, before the download,
	// and the bytes read) and the files extracted from it.
	MaxSize int64
	// Attempts and Backoff: a failed download is tried Attempts times in
	// all, waiting Backoff, then twice that, between tries.
	Attempts int
	Backoff  time.Duration
	Timeout  time.Duration

	flight    source.FlightGroup[artifact.Artifact]
	downloads atomic.Int64
}

// NewFetcher returns a Fetcher with the defaults.
func NewFetcher() *Fetcher {
	return &Fetcher{MaxSize: DefaultMaxSize, Attempts: DefaultAttempts, Backoff: time.Second, Timeout: DefaultTimeout}
}

// Downloads returns how many downloads the Fetcher started (retries
// included).
func (f *Fetcher) Downloads() int64 { return f.downloads.Load() }

// IndexKey is the store index key of a source artifact's tree.
func IndexKey(digest string) string { return "flux\x00" + digest }

// Fetch returns the tree of art, downloading it unless an artifact of the
// same digest was fetched before. Errors: *DigestError, *LimitError,
// artifact's *UnsafePathError and *LimitError, and *source.TransientError
// for failed downloads.
func (f *Fetcher) Fetch(ctx context.Context, art Artifact, store *artifact.Store) (artifact.Artifact, error) {
	if art.Digest == "" {
		return artifact.Artifact{}, &source.InvalidSpecError{Field: "status.artifact.digest", Value: "", Reason: "the source publishes no digest, so its artifact cannot be verified"}
	}
	_, algo, err := newHash(art.Digest)
	if err != nil {
		return artifact.Artifact{}, &source.InvalidSpecError{Field: "status.artifact.digest", Value: art.Digest, Reason: err.Error()}
	}
	key := IndexKey(art.Digest)
	return source.FetchOnce(ctx, &f.flight, store, key, f.Timeout, func(ctx context.Context) (artifact.Artifact, error) {
		return f.fetchWithRetries(ctx, art, algo, store, key)
	})
}

func (f *Fetcher) fetchWithRetries(ctx context.Context, art Artifact, algo string, store *artifact.Store, key string) (artifact.Artifact, error) {
	attempts := max(f.Attempts, 1)
	wait := f.Backoff
	var lastErr error
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return artifact.Artifact{}, lastErr
			case <-time.After(wait):
			}
			wait *= 2
		}
		a, err := f.fetchOnce(ctx, art, algo, store, key)
		if err == nil {
			return a, nil
		}
		lastErr = err
		if !retryable(err) {
			return artifact.Artifact{}, err
		}
	}
	return artifact.Artifact{}, &source.TransientError{URL: art.URL, Op: "download artifact", Reason: fmt.Sprintf("%v (tried %d times)", lastErr, attempts), Err: lastErr}
}

// downloadError is a failed request or read: worth retrying.
type downloadError struct{ err error }

func (e *downloadError) Error() string { return e.err.Error() }
func (e *downloadError) Unwrap() error { return e.err }

func retryable(err error) bool {
	var d *downloadError
	return errors.As(err, &d)
}

func (f *Fetcher) fetchOnce(ctx context.Context, art Artifact, algo string, store *artifact.Store, key string) (artifact.Artifact, error) {
	if art.Size != nil && f.MaxSize > 0 && *art.Size > f.MaxSize {
		return artifact.Artifact{}, &LimitError{URL: art.URL, Size: *art.Size, Max: f.MaxSize}
	}
	f.downloads.Add(1)
	defer source.Request(source.KindFluxArtifact, art.URL)()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, art.URL, nil)
	if err != nil {
		return artifact.Artifact{}, &source.InvalidSpecError{Field: "status.artifact.url", Value: art.URL, Reason: err.Error()}
	}
	client := f.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return artifact.Artifact{}, &downloadError{fmt.Errorf("GET %s: %w", art.URL, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return artifact.Artifact{}, &downloadError{fmt.Errorf("GET %s: %s", art.URL, resp.Status)}
	}
	if f.MaxSize > 0 && resp.ContentLength > f.MaxSize {
		return artifact.Artifact{}, &LimitError{URL: art.URL, Size: resp.ContentLength, Max: f.MaxSize}
	}

	staging, err := store.TempDir("flux-")
	if err != nil {
		return artifact.Artifact{}, err
	}
	defer os.RemoveAll(staging)
	tree := filepath.Join(staging, "tree")
	h, _, _ := newHash(art.Digest)
	r := &boundedReader{r: resp.Body, h: h, max: f.MaxSize}
	untarErr := artifact.Untar(r, tree, artifact.Limits{MaxBytes: f.MaxSize})
	// Read what Untar left (padding, the gzip trailer) so that the digest
	// covers every byte; a wrong digest explains any extraction error.
	if _, err := io.Copy(io.Discard, r); err != nil && untarErr == nil {
		untarErr = err
	}
	if r.over {
		return artifact.Artifact{}, &LimitError{URL: art.URL, Size: r.n, Max: f.MaxSize}
	}
	if r.readErr != nil {
		return artifact.Artifact{}, &downloadError{fmt.Errorf("reading %s: %w", art.URL, r.readErr)}
	}
	if got := sum(algo, h); got != art.Digest {
		return artifact.Artifact{}, &DigestError{URL: art.URL, Published: art.Digest, Got: got}
	}
	if untarErr != nil {
		return artifact.Artifact{}, fmt.Errorf("extracting the artifact of revision %s: %w", art.Revision, untarErr)
	}
	a, err := store.Put(ctx, tree)
	if err != nil {
		return artifact.Artifact{}, err
	}
	if err := store.Link(key, a.Digest); err != nil {
		return artifact.Artifact{}, err
	}
	return a, nil
}

// boundedReader hashes what it reads and stops one byte past max.
type boundedReader struct {
	r       io.Reader
	h       hash.Hash
	max     int64
	n       int64
	over    bool
	readErr error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.over {
		return 0, errOverLimit
	}
	if b.max > 0 && int64(len(p)) > b.max-b.n+1 {
		p = p[:b.max-b.n+1]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	b.h.Write(p[:n])
	if b.max > 0 && b.n > b.max {
		b.over = true
		return n, errOverLimit
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.readErr = err
	}
	return n, err
}

var errOverLimit = errors.New("artifact over the size limit")

// LimitError reports an artifact larger than the bound.
type LimitError struct {
	URL       string
	Size, Max int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("artifact %s is at least %d bytes, over the limit of %d bytes (controller flag --artifact-max-size)", e.URL, e.Size, e.Max)
}
