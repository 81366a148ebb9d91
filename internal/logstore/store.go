// Package logstore keeps the engine logs of each Stack's recent operations
// on the controller's disk: <dir>/<stack uid>/<operation id>.log, the last
// Keep operations of each Stack, each at most MaxBytes (head and tail kept,
// with a "… N bytes omitted …" line), removed with the Stack.
//
// The runner writes a log straight to its place here (runner.Spec.LogFile),
// so a reader can follow an operation while it runs; the store only knows
// which operations are still running, in memory: after a restart none is.
package logstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
)

const (
	// DefaultKeep is how many operations' logs a Stack keeps: as many as
	// status.history lists.
	DefaultKeep = 10
	// DefaultMaxBytes bounds one operation's log.
	DefaultMaxBytes = 1 << 20
)

// ErrNotFound is a log the store does not hold (never written, or pruned).
var ErrNotFound = errors.New("no such log")

// idPattern is what an operation ID or a UID may be: they become file names.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID says whether id may name a log (no path separators, no "..").
func ValidID(id string) bool {
	return idPattern.MatchString(id) && !strings.Contains(id, "..")
}

// Store is the logs under one directory.
type Store struct {
	dir      string
	keep     int
	maxBytes int64

	mu      sync.Mutex
	running map[string]bool // "<uid>/<id>"
}

// New makes a store in dir (created when missing).
func New(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("logs dir: %w", err)
	}
	return &Store{dir: dir, keep: DefaultKeep, maxBytes: DefaultMaxBytes, running: map[string]bool{}}, nil
}

// SetLimits changes how many logs a Stack keeps and how long one may be.
func (s *Store) SetLimits(keep int, maxBytes int64) {
	s.keep, s.maxBytes = max(keep, 1), max(maxBytes, 1024)
}

func (s *Store) path(uid, id string) string { return filepath.Join(s.dir, uid, id+".log") }

// Begin marks operation id of the Stack uid as running and returns the path
// its runner writes the log to.
func (s *Store) Begin(uid, id string) (string, error) {
	if !ValidID(uid) || !ValidID(id) {
		return "", fmt.Errorf("logs: %q/%q cannot name a log file", uid, id)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, uid), 0o700); err != nil {
		return "", fmt.Errorf("logs: %w", err)
	}
	// The file exists from now on: a reader asking for the Stack's last
	// operation gets this one, even before its runner wrote a line.
	f, err := os.OpenFile(s.path(uid, id), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("logs: %w", err)
	}
	_ = f.Close()
	s.mu.Lock()
	s.running[uid+"/"+id] = true
	s.mu.Unlock()
	return s.path(uid, id), nil
}

// End marks the operation done, bounds its log and drops the Stack's logs
// beyond the last Keep.
func (s *Store) End(uid, id string) error {
	s.mu.Lock()
	delete(s.running, uid+"/"+id)
	s.mu.Unlock()
	if !ValidID(uid) || !ValidID(id) {
		return nil
	}
	err := bound(s.path(uid, id), s.maxBytes)
	if errors.Is(err, os.ErrNotExist) {
		err = nil // the runner never got as far as the engine
	}
	return errors.Join(err, s.prune(uid))
}

// Running says whether the operation is still running.
func (s *Store) Running(uid, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[uid+"/"+id]
}

// Open opens an operation's log for reading.
func (s *Store) Open(uid, id string) (*os.File, error) {
	if !ValidID(uid) || !ValidID(id) {
		return nil, ErrNotFound
	}
	f, err := os.Open(s.path(uid, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	return f, err
}

// Has says whether the store holds the operation's log.
func (s *Store) Has(uid, id string) bool {
	if !ValidID(uid) || !ValidID(id) {
		return false
	}
	_, err := os.Stat(s.path(uid, id))
	return err == nil
}

// List is the IDs of the Stack's logs, newest first.
func (s *Store) List(uid string) ([]string, error) {
	if !ValidID(uid) {
		return nil, nil
	}
	entries, err := os.ReadDir(filepath.Join(s.dir, uid))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type log struct {
		id  string
		mod int64
	}
	var logs []log
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		logs = append(logs, log{id, info.ModTime().UnixNano()})
	}
	sort.SliceStable(logs, func(i, j int) bool {
		if logs[i].mod != logs[j].mod {
			return logs[i].mod > logs[j].mod
		}
		return logs[i].id > logs[j].id
	})
	ids := make([]string, len(logs))
	for i, l := range logs {
		ids[i] = l.id
	}
	return ids, nil
}

// prune removes the Stack's logs past the newest Keep, never a running one.
func (s *Store) prune(uid string) error {
	ids, err := s.List(uid)
	if err != nil || len(ids) <= s.keep {
		return err
	}
	var errs []error
	for _, id := range ids[s.keep:] {
		if s.Running(uid, id) {
			continue
		}
		if err := os.Remove(s.path(uid, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveStack removes every log of the Stack uid (it is deleted).
func (s *Store) RemoveStack(uid string) error {
	if !ValidID(uid) {
		return nil
	}
	return os.RemoveAll(filepath.Join(s.dir, uid))
}

// bound cuts the file at path to at most max bytes: its first and last
// halves, whole lines, with a line saying how much is left out between.
// The runner already bounds what it writes; this holds for any writer.
func bound(path string, max int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() <= max {
		return err
	}
	half := (max - 64) / 2 // room for the marker line
	head := make([]byte, half)
	if _, err := io.ReadFull(f, head); err != nil {
		return err
	}
	if i := strings.LastIndexByte(string(head), '\n'); i >= 0 {
		head = head[:i+1]
	}
	tail := make([]byte, half)
	if _, err := f.ReadAt(tail, info.Size()-half); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if i := strings.IndexByte(string(tail), '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:]
	}
	omitted := info.Size() - int64(len(head)) - int64(len(tail))
	tmp := path + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s… %d bytes omitted …\n%s", head, omitted, tail)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	// The file keeps its modification time: it orders the Stack's logs.
	_ = os.Chtimes(tmp, info.ModTime(), info.ModTime())
	return os.Rename(tmp, path)
}
