package opchannel

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stackpilot/stackpilot/internal/artifact"
)

// The dependency cache: what a runner Pod's package manager installed
// (runner.Deps), kept on the controller as one tar.gz per namespace and key
// so that the next Pod of the same lockfile restores it instead of
// installing again.
//
//	GET /v1/operations/{id}/deps/{key}   the entry, or 404
//	PUT /v1/operations/{id}/deps/{key}   a new entry (tar.gz), at most MaxDepsBytes
//
// Why it is shaped so:
//   - Per namespace, never across: the key is computed by the Pod, and the
//     Pod runs the tenant's program, so an entry holds whatever that
//     program's Pod chose to send. Within a namespace whoever may write a
//     Stack may run any program there anyway; across namespaces an entry
//     would be code one tenant plants in another's Pods. The namespace is
//     the registration's (Operation.Stack), never the request's.
//   - The key is exactly 64 lowercase hex digits, so a path is made of it
//     and of the namespace (a DNS label) only: no "..", no separator.
//   - An entry is written to a temporary file beside it and renamed: a
//     reader sees a whole entry or none. A later entry of a key replaces
//     the earlier one: a Pod sends one only after a miss, so after it found
//     none, or one it could not restore (which heals it). That gives a Pod
//     no power it lacked: it could have sent the first entry of any key.
//   - Each namespace is bounded (DepCache.MaxNamespaceBytes), and so is
//     the whole cache (DepCache.MaxBytes: it shares the controller's data
//     volume, whose emptyDir has a sizeLimit): past a bound, the entries
//     used longest ago go first (a hit touches its entry). The whole
//     cache's bound lets one namespace's new entries push out another's
//     old ones: that costs the other an install, never an entry of its own
//     being read by someone else.
//   - The Pod unpacks an entry with artifact.Untar and DepsLimits: an entry
//     is an archive from a tenant like any other.

// Bounds of the dependency cache.
const (
	// MaxDepsBytes bounds one entry (compressed), as the Pod sends it.
	MaxDepsBytes = 1 << 30
	// DefaultMaxNamespaceDepsBytes bounds one namespace's entries.
	DefaultMaxNamespaceDepsBytes = 2 << 30
	// DefaultMaxDepsBytes bounds the whole cache: the installed manager's
	// data volume has a sizeLimit of 10Gi, shared with the artifacts and
	// the work directories.
	DefaultMaxDepsBytes = 4 << 30
)

// DepsLimits bound what a Pod unpacks of an entry: a node_modules has many
// more files than a program tree.
var DepsLimits = artifact.Limits{MaxBytes: 4 << 30, MaxFiles: 500_000}

// uploadPatience is how long the controller reads one entry.
const uploadPatience = 30 * time.Minute

// staleTemp is the age past which a temporary file of an upload is an
// upload that died with its controller.
const staleTemp = time.Hour

// DepCache is the dependency cache's place on the controller's disk.
type DepCache struct {
	// Dir holds one folder per namespace (for example <data dir>/deps).
	Dir string
	// MaxNamespaceBytes bounds each namespace's entries; zero means
	// DefaultMaxNamespaceDepsBytes.
	MaxNamespaceBytes int64
	// MaxBytes bounds all the namespaces' entries; zero means
	// DefaultMaxDepsBytes.
	MaxBytes int64
}

// depCache is a Server's dependency cache.
type depCache struct {
	DepCache
	mu sync.Mutex // orders the renames and the trimming
}

// UseDependencyCache turns the dependency cache on: Pods of registered
// operations may read and write the entries of their own namespace under
// c.Dir. Without it, every GET answers 404 and every PUT 404: each Pod
// installs its program's dependencies itself.
func (s *Server) UseDependencyCache(c DepCache) error {
	if c.Dir == "" {
		return errors.New("opchannel: the dependency cache needs a folder")
	}
	if c.MaxNamespaceBytes <= 0 {
		c.MaxNamespaceBytes = DefaultMaxNamespaceDepsBytes
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxDepsBytes
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("opchannel: the dependency cache: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deps = &depCache{DepCache: c}
	return nil
}

func (s *Server) depCache() *depCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deps
}

// validDepsKey says key is a SHA-256 in lowercase hex: the only names the
// cache makes files of.
func validDepsKey(key string) bool {
	if len(key) != 64 {
		return false
	}
	for _, c := range key {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// stackNamespace is the namespace of an Operation.Stack ("<ns>/<name>"),
// when it is a DNS label (what Kubernetes allows a namespace to be).
func stackNamespace(stack string) (string, bool) {
	ns, _, ok := strings.Cut(stack, "/")
	if !ok || ns == "" || len(ns) > 63 || ns[0] == '-' || ns[len(ns)-1] == '-' {
		return "", false
	}
	for _, c := range ns {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return "", false
		}
	}
	return ns, true
}

// entryPath is the file of reg's namespace and the request's key, or an
// answer already written.
func (s *Server) entryPath(w http.ResponseWriter, r *http.Request, reg *registration) (*depCache, string, bool) {
	c := s.depCache()
	if c == nil {
		http.Error(w, "this controller keeps no dependency cache", http.StatusNotFound)
		return nil, "", false
	}
	key := r.PathValue("key")
	if !validDepsKey(key) {
		http.Error(w, "deps: the key must be a SHA-256 in lowercase hex", http.StatusBadRequest)
		return nil, "", false
	}
	ns, ok := stackNamespace(reg.op.Stack)
	if !ok {
		http.Error(w, errDenied.Error(), http.StatusForbidden)
		return nil, "", false
	}
	return c, filepath.Join(c.Dir, ns, key+".tar.gz"), true
}

func (s *Server) getDeps(w http.ResponseWriter, r *http.Request, reg *registration) {
	_, path, ok := s.entryPath(w, r, reg)
	if !ok {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "no dependency cache entry of this key", http.StatusNotFound)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.Error(w, "no dependency cache entry of this key", http.StatusNotFound)
		return
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now) // used: trimmed last
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	if _, err := io.Copy(w, f); err != nil {
		panic(http.ErrAbortHandler) // a shorter archive must not look whole
	}
}

func (s *Server) putDeps(w http.ResponseWriter, r *http.Request, reg *registration) {
	c, path, ok := s.entryPath(w, r, reg)
	if !ok {
		return
	}
	limit := min(int64(MaxDepsBytes), c.MaxNamespaceBytes, c.MaxBytes)
	if r.ContentLength > limit {
		http.Error(w, fmt.Sprintf("the entry is larger than %d bytes", limit), http.StatusRequestEntityTooLarge)
		return
	}
	// The listener bounds a request's reading to minutes (listener.go), an
	// entry may take longer to arrive; its size is bounded instead.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadPatience))
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		http.Error(w, "the controller cannot write the dependency cache", http.StatusInternalServerError)
		return
	}
	tmp, code, err := receiveEntry(w, r, dir, limit)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		http.Error(w, "the controller cannot write the dependency cache", http.StatusInternalServerError)
		return
	}
	c.trim(path)
	_, _ = io.WriteString(w, "cached\n")
}

// receiveEntry writes the request's body to a synced temporary file in dir
// and returns its path, or the status and text to answer. The body may hold
// at most limit bytes.
func receiveEntry(w http.ResponseWriter, r *http.Request, dir string, limit int64) (string, int, error) {
	f, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return "", http.StatusInternalServerError, errors.New("the controller cannot write the dependency cache")
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	body := http.MaxBytesReader(w, r.Body, limit)
	var magic [2]byte
	if _, err := io.ReadFull(body, magic[:]); err != nil || magic != [2]byte{0x1f, 0x8b} {
		return "", http.StatusBadRequest, errors.New("deps: the entry is not a gzip stream")
	}
	_, err = f.Write(magic[:])
	if err == nil {
		_, err = io.Copy(f, body)
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return "", http.StatusRequestEntityTooLarge, fmt.Errorf("the entry is larger than %d bytes", limit)
	}
	if err != nil {
		return "", http.StatusBadRequest, errors.New("cannot read the entry")
	}
	if err := f.Sync(); err != nil {
		return "", http.StatusInternalServerError, errors.New("the controller cannot write the dependency cache")
	}
	if err := f.Close(); err != nil {
		return "", http.StatusInternalServerError, errors.New("the controller cannot write the dependency cache")
	}
	keep = true
	return f.Name(), 0, nil
}

// cacheEntry is one entry file: its size and when it was last used.
type cacheEntry struct {
	path string
	size int64
	used time.Time
}

// trim removes entries used longest ago, first of keep's namespace until
// the rest fit in MaxNamespaceBytes, then of the whole cache until it fits
// in MaxBytes, never keep (the one just written); and the temporary files
// of uploads that died. Errors leave entries: a later upload trims again.
func (c *depCache) trim(keep string) {
	ns, total := c.entries(filepath.Dir(keep))
	evict(ns, total, c.MaxNamespaceBytes, keep)
	dirs, err := os.ReadDir(c.Dir)
	if err != nil {
		return
	}
	var all []cacheEntry
	total = 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		es, t := c.entries(filepath.Join(c.Dir, d.Name()))
		all, total = append(all, es...), total+t
	}
	evict(all, total, c.MaxBytes, keep)
}

// entries are the entries of one namespace's folder and their total size.
func (c *depCache) entries(dir string) ([]cacheEntry, int64) {
	list, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0
	}
	var all []cacheEntry
	var total int64
	for _, e := range list {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".upload-") {
			if time.Since(fi.ModTime()) > staleTemp {
				_ = os.Remove(p)
			}
			continue
		}
		total += fi.Size()
		all = append(all, cacheEntry{p, fi.Size(), fi.ModTime()})
	}
	return all, total
}

// evict removes entries, used longest ago first, until total fits in max;
// never keep.
func evict(all []cacheEntry, total, max int64, keep string) {
	slices.SortFunc(all, func(a, b cacheEntry) int { return cmp.Compare(a.used.UnixNano(), b.used.UnixNano()) })
	for _, e := range all {
		if total <= max {
			return
		}
		if e.path == keep {
			continue
		}
		if err := os.Remove(e.path); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= e.size
		}
	}
}
