package opchannel

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stackpilot/stackpilot/internal/runner"
)

// Operation is one operation a runner Pod may serve itself from.
type Operation struct {
	ID       string // operation ID (unique; names the Job)
	StackUID string // the Stack's metadata.uid
	Stack    string // "<namespace>/<name>", for messages
	// Spec is what the Pod runs. Its WorkDir is relative: the program folder
	// inside the tree ("" or "." for the root). LogFile, ProgressFile,
	// PulumiHome and PulumiCommand are the controller's and are not sent;
	// Plan, when set, is the controller's path of the plan file (see doc.go).
	Spec runner.Spec
	// Digest is the tree's digest (artifact.Digest's form, "sha256:<hex>").
	Digest string
	// TreeDir is the stored tree's root on the controller, served as a tar stream.
	TreeDir string
	// LogFile is where the engine log chunks the Pod sends are written; ""
	// drops them.
	LogFile string
	// ProgressFile is where each progress document the Pod sends is written,
	// atomically; "" drops them.
	ProgressFile string
	// Expires: the credential is refused after it. It must cover the Job's
	// activeDeadlineSeconds and the Pod's retries of its result.
	Expires time.Time
}

// Server holds the registered operations and serves their Pods (Handler). It
// is safe for concurrent use.
type Server struct {
	mu  sync.Mutex
	ops map[string]*registration
	now func() time.Time // for tests of expiry
	// deps is the dependency cache (depcache.go); nil: none.
	deps *depCache
}

// registration is one operation and what its Pod has sent so far.
type registration struct {
	op   Operation
	hash [sha256.Size]byte

	results chan runner.Result // buffered 1: the accepted result
	// posted is the accepted result, as JSON (nil until one was accepted).
	posted []byte

	// logMu orders the writes of the log file and of the plan file.
	logMu   sync.Mutex
	logSize int64 // bytes of the engine log written so far
}

// NewServer returns a Server without operations.
func NewServer() *Server {
	return &Server{ops: map[string]*registration{}, now: time.Now}
}

// credentialBytes is the entropy of a credential.
const credentialBytes = 32

// CredentialHash is what the controller keeps of a credential (and puts on
// the Job, for Adopt): its SHA-256, hex.
func CredentialHash(credential string) string {
	sum := sha256.Sum256([]byte(credential))
	return hex.EncodeToString(sum[:])
}

// Register mints a fresh credential for op and keeps only its hash. The
// credential opens op's endpoints only, until op.Expires. An ID already
// registered is refused: an ID names one operation.
func (s *Server) Register(op Operation) (string, error) {
	raw := make([]byte, credentialBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	credential := base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(credential))
	if err := s.add(op, sum, false); err != nil {
		return "", err
	}
	return credential, nil
}

// Adopt registers op again after a controller restart, with the hash of the
// credential its Pod already holds (from the Job's annotation). The engine
// log goes on where the file ends: the Pod is told to resend from there.
func (s *Server) Adopt(op Operation, credentialHash string) error {
	b, err := hex.DecodeString(credentialHash)
	if err != nil || len(b) != sha256.Size {
		return fmt.Errorf("opchannel: operation %s: the credential hash is not %d hex bytes", op.ID, sha256.Size)
	}
	return s.add(op, [sha256.Size]byte(b), true)
}

func (s *Server) add(op Operation, hash [sha256.Size]byte, adopted bool) error {
	if err := checkOperation(op); err != nil {
		return err
	}
	reg := &registration{op: op, hash: hash, results: make(chan runner.Result, 1)}
	// The log is prepared under the lock, after the check: a second Register
	// of a running operation must not truncate its log.
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ops[op.ID]; ok {
		return fmt.Errorf("opchannel: operation %s is already registered", op.ID)
	}
	if op.LogFile != "" {
		size, err := prepareLog(op.LogFile, adopted)
		if err != nil {
			return fmt.Errorf("opchannel: operation %s: engine log: %w", op.ID, err)
		}
		reg.logSize = size
	}
	s.ops[op.ID] = reg
	return nil
}

func checkOperation(op Operation) error {
	switch {
	case op.ID == "" || op.ID == "." || op.ID == ".." || strings.ContainsAny(op.ID, `/\?#%`):
		// The ID is a path segment of every endpoint.
		return fmt.Errorf("opchannel: operation ID %q cannot be a path segment", op.ID)
	case op.Spec.ID != op.ID:
		return fmt.Errorf("opchannel: operation %s: its spec is for operation %q", op.ID, op.Spec.ID)
	case !strings.HasPrefix(op.Digest, "sha256:") || len(op.Digest) != len("sha256:")+2*sha256.Size:
		return fmt.Errorf("opchannel: operation %s: digest %q is not sha256:<hex>", op.ID, op.Digest)
	case op.TreeDir == "":
		return fmt.Errorf("opchannel: operation %s has no tree", op.ID)
	case op.Expires.IsZero():
		return fmt.Errorf("opchannel: operation %s: its credential must expire", op.ID)
	case filepath.IsAbs(op.Spec.WorkDir):
		return fmt.Errorf("opchannel: operation %s: the work dir must be relative to the tree, not %q", op.ID, op.Spec.WorkDir)
	}
	return nil
}

// prepareLog creates (or, adopting, keeps) the log file and returns its size.
func prepareLog(path string, adopted bool) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, err
	}
	flags := os.O_CREATE | os.O_WRONLY
	if !adopted {
		flags |= os.O_TRUNC // as the runner does: a new operation's log starts empty
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Result receives the operation's result once its Pod posted it. The channel
// is buffered (1) and receives at most one value; it is nil for an
// operation that is not registered.
func (s *Server) Result(id string) <-chan runner.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reg, ok := s.ops[id]; ok {
		return reg.results
	}
	return nil
}

// Unregister forgets the operation: its credential opens nothing from now on.
// Call it once the result was consumed, or the Job is gone.
func (s *Server) Unregister(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ops, id)
}

// errDenied and errExpired are the only reasons a request is told.
var (
	errDenied  = errors.New("forbidden: this credential does not open this operation")
	errExpired = errors.New("forbidden: the credential of this operation has expired")
)

// authorize returns the registration that credential opens for id. Whether
// id is unknown or the credential is another's, the answer is the same.
func (s *Server) authorize(id, credential string) (*registration, error) {
	sum := sha256.Sum256([]byte(credential))
	s.mu.Lock()
	reg, ok := s.ops[id]
	s.mu.Unlock()
	if !ok || credential == "" || subtle.ConstantTimeCompare(sum[:], reg.hash[:]) != 1 {
		return nil, errDenied
	}
	if !s.now().Before(reg.op.Expires) {
		return nil, errExpired
	}
	return reg, nil
}
