package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// A file:// backend writes each state file through gocloud's fileblob: the
// data goes to a temporary file "<file>.<hex nanoseconds>.tmp" beside it
// (the DIY backend opens file:// buckets with no_tmp_dir), then an
// ".attrs" sidecar (JSON: the content type) is created and written in place,
// then the temporary file is renamed over the file. A process killed in
// between leaves an empty sidecar, which every later read fails on ("failed
// to load checkpoint: EOF") for ever, and the temporary file.
//
// Before an operation the runner repairs what is provably safe: an empty
// sidecar holds nothing (fileblob reads a missing one as "no attributes"), and
// a temporary file that no writer holds (no lock on the stack, and old) is
// never renamed by anyone. It never touches a checkpoint: what it cannot
// repair fails with a TornStateError that names the file and the fix.

// tempStaleAfter is how old a temporary file must be before it is taken for
// a dead writer's: a live one is renamed within moments of its creation.
const tempStaleAfter = 10 * time.Minute

// TornStateError is a state file of a file:// backend left broken by a write
// cut short, which the runner may not repair itself.
type TornStateError struct {
	File string
	Fix  string
}

func (e *TornStateError) Error() string {
	return fmt.Sprintf("the state file %s was left broken by a write cut short (a killed pulumi process): %s; the next operation then proceeds", e.File, e.Fix)
}

// stateFiles are the files of the stack whose sidecars the CLI reads.
func (s fileStack) stateFiles() []string {
	return []string{s.base + ".json", s.base + ".json.gz", s.base + ".json.bak", s.base + ".json.gz.bak", s.tagsPath()}
}

// repairSidecars removes the stack's empty sidecars and says what it did, one
// sentence per repair. A sidecar that is not JSON, or an empty checkpoint,
// fails.
func (s fileStack) repairSidecars() ([]string, error) {
	var repairs []string
	for _, file := range s.stateFiles() {
		sidecar := file + ".attrs"
		data, err := os.ReadFile(sidecar)
		switch {
		case os.IsNotExist(err):
			continue
		case err != nil:
			return repairs, err
		case len(strings.TrimSpace(string(data))) == 0:
			if err := os.Remove(sidecar); err != nil && !os.IsNotExist(err) {
				return repairs, err
			}
			repairs = append(repairs, fmt.Sprintf("removed the empty sidecar %s that a write cut short had left", sidecar))
		case !json.Valid(data):
			return repairs, &TornStateError{File: sidecar,
				Fix: "it holds only the file's content type: remove it"}
		}
	}
	if cp := s.checkpointPath(); cp != "" {
		if info, err := os.Stat(cp); err == nil && info.Size() == 0 {
			return repairs, &TornStateError{File: cp + " is empty",
				Fix: fmt.Sprintf("restore the last good checkpoint (%s.bak, or the newest file of the stack's .pulumi/history folder) "+
					"with `pulumi stack import`, or copy it over %s", cp, filepath.Base(cp))}
		}
	}
	return repairs, nil
}

// tempPattern matches the temporary files fileblob makes for the files of
// stack short: "<file>.<hex digits>.tmp".
func (s fileStack) tempPattern() *regexp.Regexp {
	short := regexp.QuoteMeta(filepath.Base(s.base))
	return regexp.MustCompile(`^` + short + `\.(json|json\.gz|json\.bak|json\.gz\.bak|pulumi-tags)\.[0-9a-f]+\.tmp$`)
}

// removeStaleTemps removes the stack's temporary files when nothing may be
// writing them: no lock on the stack (locks are its lock files), and older
// than tempStaleAfter at now. A file it cannot remove is left: it harms no
// read.
func (s fileStack) removeStaleTemps(locks []string, now time.Time) []string {
	if len(locks) > 0 {
		return nil
	}
	dir := filepath.Dir(s.base)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	pattern := s.tempPattern()
	var repairs []string
	for _, e := range entries {
		if e.IsDir() || !pattern.MatchString(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < tempStaleAfter {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if os.Remove(path) == nil {
			repairs = append(repairs, fmt.Sprintf("removed the stale temporary file %s that a write cut short had left", path))
		}
	}
	return repairs
}
