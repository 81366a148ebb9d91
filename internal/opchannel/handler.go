package opchannel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stackpilot/stackpilot/internal/atomicfile"
	"github.com/stackpilot/stackpilot/internal/logstore"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// pathPrefix starts every endpoint: pathPrefix + "{id}/" + what.
const pathPrefix = "/v1/operations/"

// Bounds of what a Pod may send. The spec and the result the controller
// sends or keeps are bounded on the Pod's side (maxSpecBytes).
const (
	// MaxProgressBytes bounds a progress document (a few counts).
	MaxProgressBytes = 4 << 10
	// MaxResultBytes bounds a result: per-resource changes and the stack's
	// outputs, which an outputs Secret (1 MiB) could not hold more of.
	MaxResultBytes = 8 << 20
	// MaxLogChunkBytes bounds one engine log request.
	MaxLogChunkBytes = 256 << 10
	// MaxLogBytes bounds an operation's engine log, as the log store bounds
	// it: the runner keeps its log under it (runner.LogHeadBytes +
	// runner.LogTailBytes), so only a broken or hostile Pod reaches it.
	MaxLogBytes = logstore.DefaultMaxBytes
	// MaxPlanBytes bounds a saved plan file.
	MaxPlanBytes = 64 << 20
)

// logOffsetHeader carries, in a log answer, the offset the Pod sends from next.
const logOffsetHeader = "Stackpilot-Log-Offset"

// podSpec is what GET spec answers: the spec to run and the digest the tree
// must have.
type podSpec struct {
	Spec   runner.Spec `json:"spec"`
	Digest string      `json:"digest"`
	Stack  string      `json:"stack"`
}

// planMarker is Spec.Plan as sent: a plan takes part, its path is the Pod's.
const planMarker = "plan.json"

// Handler serves the runner Pods' endpoints (see doc.go).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathPrefix+"{id}/spec", s.guard(s.getSpec))
	mux.HandleFunc("GET "+pathPrefix+"{id}/artifact", s.guard(s.getArtifact))
	mux.HandleFunc("GET "+pathPrefix+"{id}/plan", s.guard(s.getPlan))
	mux.HandleFunc("POST "+pathPrefix+"{id}/log", s.guard(s.postLog))
	mux.HandleFunc("PUT "+pathPrefix+"{id}/progress", s.guard(s.putProgress))
	mux.HandleFunc("PUT "+pathPrefix+"{id}/plan", s.guard(s.putPlan))
	mux.HandleFunc("PUT "+pathPrefix+"{id}/plan-inputs", s.guard(s.putPlanInputs))
	mux.HandleFunc("PUT "+pathPrefix+"{id}/result", s.guard(s.putResult))
	mux.HandleFunc("GET "+pathPrefix+"{id}/deps/{key}", s.guard(s.getDeps))
	mux.HandleFunc("PUT "+pathPrefix+"{id}/deps/{key}", s.guard(s.putDeps))
	return mux
}

type opHandler func(w http.ResponseWriter, r *http.Request, reg *registration)

// guard lets a request through only with the credential of the operation in
// its path.
func (s *Server) guard(h opHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		credential, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		reg, err := s.authorize(r.PathValue("id"), credential)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		h(w, r, reg)
	}
}

// sentSpec is the spec as the Pod gets it: the controller's paths left out.
func sentSpec(spec runner.Spec) runner.Spec {
	spec.LogFile, spec.ProgressFile, spec.PulumiHome, spec.PulumiCommand = "", "", "", ""
	if spec.Plan != "" {
		spec.Plan = planMarker
	}
	if spec.WorkDir == "" {
		spec.WorkDir = "."
	}
	if spec.APIVersion == "" {
		spec.APIVersion = runner.APIVersion
	}
	return spec
}

func (s *Server) getSpec(w http.ResponseWriter, _ *http.Request, reg *registration) {
	writeJSON(w, podSpec{Spec: sentSpec(reg.op.Spec), Digest: reg.op.Digest, Stack: reg.op.Stack})
}

func (s *Server) getArtifact(w http.ResponseWriter, _ *http.Request, reg *registration) {
	if fi, err := os.Stat(reg.op.TreeDir); err != nil || !fi.IsDir() {
		http.Error(w, "the operation's program tree is not on the controller any more", http.StatusGone)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := writeTree(w, reg.op.TreeDir); err != nil {
		// The status is sent: only a broken connection tells the Pod, which
		// would otherwise see a shorter, well-formed archive.
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) getPlan(w http.ResponseWriter, _ *http.Request, reg *registration) {
	if reg.op.Spec.Type != runner.OpUp || reg.op.Spec.Plan == "" {
		http.Error(w, "this operation applies no plan", http.StatusNotFound)
		return
	}
	f, err := os.Open(reg.op.Spec.Plan)
	if err != nil {
		// The runner fails the up with ErrorPlanInvalid, as with a missing file.
		http.Error(w, "the plan of this operation is missing", http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if _, err := io.Copy(w, f); err != nil {
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) postLog(w http.ResponseWriter, r *http.Request, reg *registration) {
	offset, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if err != nil || offset < 0 {
		http.Error(w, "offset: want the log offset of the chunk's first byte", http.StatusBadRequest)
		return
	}
	body, ok := readBody(w, r, MaxLogChunkBytes)
	if !ok {
		return
	}
	end := offset + int64(len(body))
	reg.logMu.Lock()
	defer reg.logMu.Unlock()
	if reg.op.LogFile == "" {
		w.Header().Set(logOffsetHeader, strconv.FormatInt(end, 10))
		return // the controller keeps no log of it
	}
	if offset > reg.logSize {
		// A controller restarted since: its file ends earlier.
		w.Header().Set(logOffsetHeader, strconv.FormatInt(reg.logSize, 10))
		http.Error(w, fmt.Sprintf("the log has %d bytes: send from there", reg.logSize), http.StatusConflict)
		return
	}
	data := body[min(reg.logSize-offset, int64(len(body))):] // what a retry sent again is skipped
	full := false
	if room := MaxLogBytes - reg.logSize; int64(len(data)) > room {
		data, full = data[:max(room, 0)], true
	}
	if len(data) > 0 {
		if err := appendAt(reg.op.LogFile, reg.logSize, data); err != nil {
			http.Error(w, "the controller cannot write the log", http.StatusInternalServerError)
			return
		}
		reg.logSize += int64(len(data))
	}
	if full {
		http.Error(w, fmt.Sprintf("the engine log reached its bound of %d bytes: the rest is dropped", MaxLogBytes), http.StatusRequestEntityTooLarge)
		return
	}
	w.Header().Set(logOffsetHeader, strconv.FormatInt(end, 10))
}

func appendAt(path string, off int64, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *Server) putProgress(w http.ResponseWriter, r *http.Request, reg *registration) {
	body, ok := readBody(w, r, MaxProgressBytes)
	if !ok {
		return
	}
	var p runner.Progress
	if err := json.Unmarshal(body, &p); err != nil {
		http.Error(w, "progress: not a progress document", http.StatusBadRequest)
		return
	}
	if p.ID != reg.op.ID {
		http.Error(w, "progress: it is for another operation", http.StatusBadRequest)
		return
	}
	if reg.op.ProgressFile == "" {
		return
	}
	b, err := json.Marshal(p) // only the fields the controller reads
	if err == nil {
		err = atomicfile.Write(reg.op.ProgressFile, b, 0o600)
	}
	if err != nil {
		http.Error(w, "the controller cannot write the progress", http.StatusInternalServerError)
	}
}

func (s *Server) putPlan(w http.ResponseWriter, r *http.Request, reg *registration) {
	keepWithPlan(w, r, reg, "the plan", func(plan string) string { return plan }, nil)
}

// putPlanInputs keeps the prior inputs a preview sends after its plan
// (runner.PlanInputsFile), beside the plan.
func (s *Server) putPlanInputs(w http.ResponseWriter, r *http.Request, reg *registration) {
	keepWithPlan(w, r, reg, "the plan inputs", runner.PlanInputsFile, func(body []byte) bool {
		return json.Unmarshal(body, new(runner.PlanInputs)) == nil
	})
}

// keepWithPlan writes what a preview that saves a plan sends (what: "the
// plan", ...) to at(Spec.Plan), once valid (nil: any body) says it is
// what it should be, and only until the result is in.
func keepWithPlan(w http.ResponseWriter, r *http.Request, reg *registration, what string, at func(plan string) string, valid func([]byte) bool) {
	if reg.op.Spec.Type != runner.OpPreview || reg.op.Spec.Plan == "" {
		http.Error(w, "this operation saves no plan", http.StatusBadRequest)
		return
	}
	body, ok := readBody(w, r, MaxPlanBytes)
	if !ok {
		return
	}
	if valid != nil && !valid(body) {
		http.Error(w, what+": not the document expected", http.StatusBadRequest)
		return
	}
	reg.logMu.Lock()
	defer reg.logMu.Unlock()
	if reg.posted != nil {
		http.Error(w, "the result is in: the plan can no longer change", http.StatusConflict)
		return
	}
	dst := at(reg.op.Spec.Plan)
	err := os.MkdirAll(filepath.Dir(dst), 0o700)
	if err == nil {
		err = atomicfile.Write(dst, body, 0o600)
	}
	if err != nil {
		http.Error(w, "the controller cannot write "+what, http.StatusInternalServerError)
	}
}

func (s *Server) putResult(w http.ResponseWriter, r *http.Request, reg *registration) {
	body, ok := readBody(w, r, MaxResultBytes)
	if !ok {
		return
	}
	var res runner.Result
	if err := json.Unmarshal(body, &res); err != nil {
		http.Error(w, "result: not a result document", http.StatusBadRequest)
		return
	}
	switch {
	case res.APIVersion != runner.APIVersion:
		http.Error(w, fmt.Sprintf("result: apiVersion %q, want %q", res.APIVersion, runner.APIVersion), http.StatusBadRequest)
		return
	case res.ID != reg.op.ID:
		http.Error(w, "result: it is for another operation", http.StatusBadRequest)
		return
	}
	canonical, err := json.Marshal(res)
	if err != nil {
		http.Error(w, "result: cannot be encoded", http.StatusBadRequest)
		return
	}
	reg.logMu.Lock()
	defer reg.logMu.Unlock()
	switch {
	case reg.posted == nil:
		reg.posted = canonical
		reg.results <- res // buffered 1, and only the first result gets here
		_, _ = io.WriteString(w, "accepted\n")
	case bytes.Equal(reg.posted, canonical):
		_, _ = io.WriteString(w, "already accepted\n")
	default:
		http.Error(w, "a different result was already accepted for this operation", http.StatusConflict)
	}
}

// readBody reads a request body of at most limit bytes, answering 413 past it.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		return b, true
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		http.Error(w, fmt.Sprintf("the body is larger than %d bytes", limit), http.StatusRequestEntityTooLarge)
	} else {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
	}
	return nil, false
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "cannot encode the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
