package opchannel

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// A result is taken once: the same again is a no-op, a different one, or
// one for another operation, is refused, and Result receives only the first.
func TestResultIsAcceptedOnce(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-result", tree, digest, runner.Spec{})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	put := func(res runner.Result) (int, string) {
		b, _ := json.Marshal(res)
		return c.call(http.MethodPut, op.ID, "result", cred, b)
	}
	first := runner.Result{APIVersion: runner.APIVersion, ID: op.ID, Type: runner.OpUp, Outcome: runner.OutcomeSucceeded,
		Changes: runner.ChangeCounts{Create: 2}}

	if code, text := put(runner.Result{APIVersion: runner.APIVersion, ID: "op-other", Outcome: runner.OutcomeFailed}); code != http.StatusBadRequest {
		t.Errorf("a result for another operation: %d %q, want 400", code, text)
	}
	if code, text := put(runner.Result{APIVersion: "v0", ID: op.ID}); code != http.StatusBadRequest {
		t.Errorf("a result of another apiVersion: %d %q, want 400", code, text)
	}
	noResult(t, c.srv, op.ID)

	if code, text := put(first); code != http.StatusOK {
		t.Fatalf("the first result: %d %q", code, text)
	}
	if code, text := put(first); code != http.StatusOK {
		t.Errorf("the same result again: %d %q, want 200", code, text)
	}
	second := first
	second.Outcome, second.Message = runner.OutcomeFailed, "changed my mind"
	if code, text := put(second); code != http.StatusConflict {
		t.Errorf("a different result: %d %q, want 409", code, text)
	}
	if got := c.result(op.ID); got.Outcome != runner.OutcomeSucceeded || got.Changes.Create != 2 {
		t.Errorf("Result received %+v, want the first", got)
	}
	noResult(t, c.srv, op.ID)
}

// Log chunks carry their offset: a retried chunk is written once, an
// overlapping one adds only its new end, one past the end is told where the
// log ends, and the log stops at its bound.
func TestLogChunksAreIdempotent(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-log", tree, digest, runner.Spec{})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	post := func(offset, body string) int {
		code, _ := c.call(http.MethodPost, op.ID, "log?offset="+offset, cred, []byte(body))
		return code
	}
	steps := []struct {
		offset, body string
		code         int
		log          string
	}{
		{"0", "one\n", http.StatusOK, "one\n"},
		{"0", "one\n", http.StatusOK, "one\n"},              // a retry
		{"2", "e\ntwo\n", http.StatusOK, "one\ntwo\n"},      // overlaps
		{"20", "lost\n", http.StatusConflict, "one\ntwo\n"}, // past the end
		{"-1", "x", http.StatusBadRequest, "one\ntwo\n"},
	}
	for _, s := range steps {
		if code := post(s.offset, s.body); code != s.code {
			t.Errorf("offset %s: %d, want %d", s.offset, code, s.code)
		}
		if got := fileText(t, op.LogFile); got != s.log {
			t.Errorf("after offset %s: log %q, want %q", s.offset, got, s.log)
		}
	}
	if code := post("8", strings.Repeat("x", MaxLogChunkBytes+1)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunk past MaxLogChunkBytes: %d, want 413", code)
	}
	// Fill up to the bound: the chunk that crosses it is cut, then refused.
	size := 8
	for size < MaxLogBytes {
		n := min(MaxLogChunkBytes, MaxLogBytes-size+10)
		code := post(itoa(size), strings.Repeat("y", n))
		size = min(size+n, MaxLogBytes)
		if size < MaxLogBytes && code != http.StatusOK || size == MaxLogBytes && code != http.StatusRequestEntityTooLarge {
			t.Fatalf("log at %d bytes: %d", size, code)
		}
	}
	if got := len(fileText(t, op.LogFile)); got != MaxLogBytes {
		t.Errorf("log of %d bytes, want the bound %d", got, MaxLogBytes)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A restarted controller adopts a running operation with the hash from the
// Job: the Pod's credential opens it again, nothing else does, and the log
// goes on where the controller's file ends.
func TestAdopt(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-adopted", tree, digest, runner.Spec{})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := c.call(http.MethodPost, op.ID, "log?offset=0", cred, []byte("before\n")); code != http.StatusOK {
		t.Fatalf("log: %d", code)
	}
	if _, err := c.srv.Register(op); err == nil {
		t.Errorf("a second Register of the same ID was taken")
	}
	restarted := newChannel(t, nil)
	if err := restarted.srv.Adopt(op, "00"); err == nil {
		t.Errorf("Adopt took a malformed hash")
	}
	if err := restarted.srv.Adopt(op, CredentialHash(cred)); err != nil {
		t.Fatal(err)
	}
	if code, text := restarted.call(http.MethodGet, op.ID, "spec", cred, nil); code != http.StatusOK {
		t.Errorf("spec after adoption: %d %q", code, text)
	}
	if code, _ := restarted.call(http.MethodGet, op.ID, "spec", cred+"x", nil); code != http.StatusForbidden {
		t.Errorf("another credential after adoption: %d, want 403", code)
	}
	if code, _ := restarted.call(http.MethodPost, op.ID, "log?offset=7", cred, []byte("after\n")); code != http.StatusOK {
		t.Errorf("log after adoption: %d", code)
	}
	if got := fileText(t, op.LogFile); got != "before\nafter\n" {
		t.Errorf("log %q: the adopted log was truncated or mixed", got)
	}
	restarted.srv.Unregister(op.ID)
	if code, _ := restarted.call(http.MethodGet, op.ID, "spec", cred, nil); code != http.StatusForbidden {
		t.Errorf("spec after Unregister: %d, want 403", code)
	}
}

// The spec sent carries none of the controller's paths.
func TestSpecSentLeavesControllerPathsOut(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-paths", tree, digest, runner.Spec{WorkDir: "prog", Type: runner.OpPreview,
		LogFile: "/controller/log", ProgressFile: "/controller/progress", PulumiHome: "/controller/home",
		PulumiCommand: "/controller/pulumi", Plan: "/controller/plans/p.json"})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	code, text := c.call(http.MethodGet, op.ID, "spec", cred, nil)
	if code != http.StatusOK || strings.Contains(text, "/controller") {
		t.Fatalf("spec: %d %s", code, text)
	}
	var ps podSpec
	if err := json.Unmarshal([]byte(text), &ps); err != nil {
		t.Fatal(err)
	}
	if ps.Digest != digest || ps.Spec.WorkDir != "prog" || ps.Spec.Plan != planMarker || ps.Spec.ID != op.ID {
		t.Errorf("spec sent: %+v", ps)
	}
}

// The artifact is the same stream every time, and unpacks to the registered
// digest: exec bits, symbolic links and nested folders survive, .git does
// not travel.
func TestArtifactRoundTrip(t *testing.T) {
	c := newChannel(t, nil)
	tree, _ := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n", "lib/deep/x.txt": "x", "bin/tool": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(tree, "bin/tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("lib/deep", filepath.Join(tree, "deep")); err != nil {
		t.Fatal(err)
	}
	digest, err := artifact.Digest(context.Background(), tree)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tree, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	op := newOp(t, "op-tree", tree, digest, runner.Spec{})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	code, first := c.call(http.MethodGet, op.ID, "artifact", cred, nil)
	if code != http.StatusOK {
		t.Fatalf("artifact: %d", code)
	}
	if _, again := c.call(http.MethodGet, op.ID, "artifact", cred, nil); again != first {
		t.Errorf("two streams of the same tree differ")
	}
	dst := filepath.Join(t.TempDir(), "tree")
	if err := artifact.Untar(strings.NewReader(first), dst, artifact.Limits{}); err != nil {
		t.Fatal(err)
	}
	if got, err := artifact.Digest(context.Background(), dst); err != nil || got != digest {
		t.Errorf("unpacked digest %s, %v; want %s", got, err, digest)
	}
	if _, err := os.Stat(filepath.Join(dst, ".git")); !os.IsNotExist(err) {
		t.Errorf(".git travelled: %v", err)
	}
}

// A preview's prior inputs are kept beside its plan (runner.PlanInputsFile);
// what is not such a document, or comes for an operation that saves no
// plan, is refused and nothing is written.
func TestPlanInputsAreKeptBesideThePlan(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	plan := filepath.Join(t.TempDir(), "plans", "p1", "plan.json")
	op := newOp(t, "op-inputs", tree, digest, runner.Spec{Type: runner.OpPreview, Plan: plan})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	if code, text := c.call(http.MethodPut, op.ID, "plan-inputs", cred, []byte("not json")); code != http.StatusBadRequest {
		t.Errorf("a body that is no document: %d %q, want 400", code, text)
	}
	if _, err := os.Stat(runner.PlanInputsFile(plan)); !os.IsNotExist(err) {
		t.Fatalf("a refused document was written (%v)", err)
	}
	doc := `{"resources":{"urn:a":{"data":{"k":"v"}}}}`
	if code, text := c.call(http.MethodPut, op.ID, "plan-inputs", cred, []byte(doc)); code != http.StatusOK {
		t.Fatalf("plan inputs: %d %q", code, text)
	}
	if got := fileText(t, runner.PlanInputsFile(plan)); got != doc {
		t.Errorf("kept %q, want %q", got, doc)
	}

	up := newOp(t, "op-up", tree, digest, runner.Spec{Type: runner.OpUp, Plan: filepath.Join(t.TempDir(), "plan.json")})
	credUp, err := c.srv.Register(up)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := c.call(http.MethodPut, up.ID, "plan-inputs", credUp, []byte(doc)); code != http.StatusBadRequest {
		t.Errorf("an up's plan inputs: %d, want 400", code)
	}
}
