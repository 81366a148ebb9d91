package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"k8s.io/apimachinery/pkg/types"
)

// Store keeps the full plans that wait for approval out of etcd, in the
// controller's data dir: <dir>/<stack-uid>/<id>/ holds Pulumi's update plan
// (plan.json, what `pulumi up --plan` applies) and the Document
// (document.json, what the /plans endpoint serves). A plan is made in a
// staging directory and renamed into place once both files are written, so a
// reader never sees half a plan, and a crash mid-preview leaves only a
// staging directory that the next plan of the Stack removes.
type Store struct {
	dir string
}

const (
	pulumiPlanFile   = "plan.json"
	planDocumentFile = "document.json"
	stagingPrefix    = ".staging-"
)

// planIDPattern is what a plan id looks like (the Stack reconciler makes them
// with newOperationID("plan")); an id from a URL or an annotation that does
// not match names no plan, and never a path outside the store.
var planIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,127}$`)

// ErrNotFound: the store holds no plan of that id for the Stack.
var ErrNotFound = errors.New("plan not found")

// NewStore makes the store's directory.
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("plans dir: %w", err)
	}
	return &Store{dir: dir}, nil
}

func (s *Store) stackDir(uid types.UID) string { return filepath.Join(s.dir, string(uid)) }

func (s *Store) planDir(uid types.UID, id string) string {
	return filepath.Join(s.stackDir(uid), id)
}

// PlanFile is the path of Pulumi's update plan of a stored plan.
func (s *Store) PlanFile(uid types.UID, id string) string {
	return filepath.Join(s.planDir(uid, id), pulumiPlanFile)
}

// Stage makes an empty staging directory for plan id and returns the path
// where the preview saves Pulumi's plan. Leftover staging directories of
// the Stack (a crash mid-preview) are removed first.
func (s *Store) Stage(uid types.UID, id string) (string, error) {
	if !planIDPattern.MatchString(id) {
		return "", fmt.Errorf("invalid plan id %q", id)
	}
	if old, _ := filepath.Glob(filepath.Join(s.stackDir(uid), stagingPrefix+"*")); len(old) > 0 {
		for _, d := range old {
			_ = os.RemoveAll(d)
		}
	}
	dir := filepath.Join(s.stackDir(uid), stagingPrefix+id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("stage plan %s: %w", id, err)
	}
	return filepath.Join(dir, pulumiPlanFile), nil
}

// Commit writes doc beside the staged Pulumi plan and moves the plan into
// place. The staged plan file must exist: a preview that saved none made no
// plan that could be applied.
func (s *Store) Commit(uid types.UID, doc *Document) error {
	staging := filepath.Join(s.stackDir(uid), stagingPrefix+doc.ID)
	defer os.RemoveAll(staging)
	if _, err := os.Stat(filepath.Join(staging, pulumiPlanFile)); err != nil {
		return fmt.Errorf("the preview saved no update plan: %w", err)
	}
	raw, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(staging, planDocumentFile), raw, 0o600); err != nil {
		return fmt.Errorf("write plan %s: %w", doc.ID, err)
	}
	if err := os.Rename(staging, s.planDir(uid, doc.ID)); err != nil {
		return fmt.Errorf("store plan %s: %w", doc.ID, err)
	}
	return nil
}

// Document reads a stored plan's Document; ErrNotFound when there is none.
func (s *Store) Document(uid types.UID, id string) (*Document, error) {
	if !planIDPattern.MatchString(id) {
		return nil, ErrNotFound
	}
	raw, err := os.ReadFile(filepath.Join(s.planDir(uid, id), planDocumentFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	doc := &Document{}
	if err := json.Unmarshal(raw, doc); err != nil {
		return nil, fmt.Errorf("plan %s: %w", id, err)
	}
	return doc, nil
}

// Has is true when both files of plan id are in place.
func (s *Store) Has(uid types.UID, id string) bool {
	if !planIDPattern.MatchString(id) {
		return false
	}
	for _, f := range []string{pulumiPlanFile, planDocumentFile} {
		if _, err := os.Stat(filepath.Join(s.planDir(uid, id), f)); err != nil {
			return false
		}
	}
	return true
}

// Prune removes every plan of the Stack but keep ("" keeps none), and any
// staging directory: a plan is committed before the status patch that names
// it, so a controller that dies in between leaves a plan no status names,
// which nothing would ever remove. Call it once status is in the API server
// and no preview runs (the Stack reconciler's data_dir.go).
func (s *Store) Prune(uid types.UID, keep string) error {
	if uid == "" {
		return nil
	}
	entries, err := os.ReadDir(s.stackDir(uid))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if keep != "" && e.Name() == keep {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.stackDir(uid), e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Remove deletes plan id (applied, replaced or dropped).
func (s *Store) Remove(uid types.UID, id string) error {
	if !planIDPattern.MatchString(id) {
		return nil
	}
	return os.RemoveAll(s.planDir(uid, id))
}

// RemoveStack deletes every plan of a Stack (it is being deleted).
func (s *Store) RemoveStack(uid types.UID) error {
	if uid == "" {
		return nil
	}
	return os.RemoveAll(s.stackDir(uid))
}

// Documents reads the Documents of every plan of the Stack, in no order;
// a plan whose files are not both in place is left out.
func (s *Store) Documents(uid types.UID) ([]*Document, error) {
	if uid == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(s.stackDir(uid))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var docs []*Document
	for _, e := range entries {
		if !e.IsDir() || !s.Has(uid, e.Name()) {
			continue
		}
		doc, err := s.Document(uid, e.Name())
		if err != nil {
			continue
		}
		docs = append(docs, doc)
	}
	return docs, nil
}

// CopyFrom stores, as plan id with doc, the Pulumi plan of plan from in
// src: a reviewed plan becomes a Stack's pending plan without a second
// preview.
func (s *Store) CopyFrom(src *Store, uid types.UID, from string, doc *Document) error {
	staged, err := s.Stage(uid, doc.ID)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(src.PlanFile(uid, from))
	if err != nil {
		return fmt.Errorf("read plan %s: %w", from, err)
	}
	if err := os.WriteFile(staged, raw, 0o600); err != nil {
		return fmt.Errorf("copy plan %s: %w", from, err)
	}
	return s.Commit(uid, doc)
}

// Discard removes what Stage made for plan id when no plan came of it (the
// preview failed or was cancelled), so that nothing of it is left behind.
func (s *Store) Discard(uid types.UID, id string) {
	if !planIDPattern.MatchString(id) || uid == "" {
		return
	}
	_ = os.RemoveAll(filepath.Join(s.stackDir(uid), stagingPrefix+id))
}
