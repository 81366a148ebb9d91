package opchannel

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/runner"
)

// endpoints are every endpoint with a body it would accept from the
// operation's own Pod.
func endpoints(id string) []struct {
	method, what string
	body         []byte
} {
	res, _ := json.Marshal(runner.Result{APIVersion: runner.APIVersion, ID: id, Outcome: runner.OutcomeSucceeded})
	prog, _ := json.Marshal(runner.Progress{ID: id, Changes: runner.ChangeCounts{Create: 1}})
	return []struct {
		method, what string
		body         []byte
	}{
		{http.MethodGet, "spec", nil},
		{http.MethodGet, "artifact", nil},
		{http.MethodGet, "plan", nil},
		{http.MethodPost, "log?offset=0", []byte("a line\n")},
		{http.MethodPut, "progress", prog},
		{http.MethodPut, "plan", []byte("{}")},
		{http.MethodPut, "plan-inputs", []byte(`{"resources":{}}`)},
		{http.MethodPut, "result", res},
	}
}

// A credential opens its own operation only: another operation's (of
// another Stack), none, a made-up one, or any for an operation that does
// not exist get the same 403, and nothing of the operation is served or
// written.
func TestOtherCredentialsAreRefused(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	a := newOp(t, "op-a", tree, digest, runner.Spec{Type: runner.OpPreview, Plan: filepath.Join(t.TempDir(), "plan"),
		Env: map[string]string{"AWS_SECRET_ACCESS_KEY": "s3cr3t-value-of-a"}})
	if _, err := c.srv.Register(a); err != nil {
		t.Fatal(err)
	}
	b := newOp(t, "op-b", tree, digest, runner.Spec{})
	credB, err := c.srv.Register(b)
	if err != nil {
		t.Fatal(err)
	}

	for _, id := range []string{"op-a", "op-unknown"} {
		for _, cred := range []string{credB, "", "not-a-credential"} {
			for _, e := range endpoints(id) {
				code, text := c.call(e.method, id, e.what, cred, e.body)
				if code != http.StatusForbidden || text != errDenied.Error()+"\n" {
					t.Errorf("%s %s of %s with credential #%d: %d %q, want 403 %q", e.method, e.what, id, len(cred), code, text, errDenied)
				}
			}
		}
	}
	if got := fileText(t, a.LogFile); got != "" {
		t.Errorf("op-a's log was written: %q", got)
	}
	if _, err := os.Stat(a.ProgressFile); !os.IsNotExist(err) {
		t.Errorf("op-a's progress was written (%v)", err)
	}
	if _, err := os.Stat(a.Spec.Plan); !os.IsNotExist(err) {
		t.Errorf("op-a's plan was written (%v)", err)
	}
	if _, err := os.Stat(runner.PlanInputsFile(a.Spec.Plan)); !os.IsNotExist(err) {
		t.Errorf("op-a's plan inputs were written (%v)", err)
	}
	noResult(t, c.srv, "op-a")

	// B's credential still opens B.
	if code, text := c.call(http.MethodGet, "op-b", "spec", credB, nil); code != http.StatusOK || strings.Contains(text, "s3cr3t") {
		t.Errorf("op-b's own spec: %d %q", code, text)
	}
}

// An expired credential opens nothing, and says so only to its holder.
func TestExpiredCredentialIsRefused(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-old", tree, digest, runner.Spec{})
	op.Expires = time.Now().Add(-time.Second)
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range endpoints("op-old") {
		if code, text := c.call(e.method, "op-old", e.what, cred, e.body); code != http.StatusForbidden || text != errExpired.Error()+"\n" {
			t.Errorf("%s %s: %d %q, want 403 %q", e.method, e.what, code, text, errExpired)
		}
	}
	noResult(t, c.srv, "op-old")
}

// A tree changed on the controller after the operation was registered is
// not run: the Pod delivers a failed result naming both digests.
func TestTamperedTreeIsNotRun(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	state := filepath.Join(t.TempDir(), "state")
	op := newOp(t, "op-tampered", tree, digest, runner.Spec{StackName: "dev", Backend: "file://" + state})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "Pulumi.yaml"), []byte("name: evil\nruntime: yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	o := c.podOptions("op-tampered", cred)
	if err := RunPod(context.Background(), o); err != nil {
		t.Fatalf("RunPod: %v", err)
	}
	res := c.result("op-tampered")
	t.Logf("result: %+v", res)
	if res.Outcome != runner.OutcomeFailed || res.ErrorClass != runner.ErrorInternal || res.Type != runner.OpUp ||
		!contains(res.Message, digest, "sha256:", "not the operation's") {
		t.Errorf("want a failed, internal result naming %s and the digest received; got %+v", digest, res)
	}
	// Naming the other digest too: two different sha256 in the message.
	if strings.Count(res.Message, "sha256:") != 2 {
		t.Errorf("the message names %d digests: %q", strings.Count(res.Message, "sha256:"), res.Message)
	}
	if _, err := os.Stat(filepath.Join(o.WorkRoot, engineLog)); !os.IsNotExist(err) {
		t.Errorf("the engine ran: %v", err)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the backend was touched: %v", err)
	}
}

// An archive whose entry leaves the tree is refused with untar's
// protections, whoever sent it, and the operation fails without running.
func TestEscapingArchiveIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry tar.Header
	}{
		{"dot-dot", tar.Header{Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}},
		{"absolute", tar.Header{Name: "/tmp/escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}},
		{"symlink", tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "../../..", Mode: 0o777}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archive := hostileTar(t, tc.entry)
			// A controller (or whatever stands in its place) that sends archive.
			c := newChannel(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.HasSuffix(r.URL.Path, "/artifact") {
						_, _ = w.Write(archive)
						return
					}
					h.ServeHTTP(w, r)
				})
			})
			tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
			op := newOp(t, "op-"+tc.name, tree, digest, runner.Spec{})
			cred, err := c.srv.Register(op)
			if err != nil {
				t.Fatal(err)
			}
			o := c.podOptions(op.ID, cred)
			if err := RunPod(context.Background(), o); err != nil {
				t.Fatalf("RunPod: %v", err)
			}
			res := c.result(op.ID)
			t.Logf("result: %+v", res)
			if res.Outcome != runner.OutcomeFailed || !contains(res.Message, "unsafe path") {
				t.Errorf("want a failed result naming the unsafe path; got %+v", res)
			}
			if _, err := os.Lstat(filepath.Join(o.WorkRoot, "escaped")); !os.IsNotExist(err) {
				t.Errorf("an entry was written outside the tree: %v", err)
			}
			if _, err := os.Stat(filepath.Join(o.WorkRoot, engineLog)); !os.IsNotExist(err) {
				t.Errorf("the engine ran: %v", err)
			}
		})
	}
}

// hostileTar is a tar of Pulumi.yaml and then entry.
func hostileTar(t *testing.T, entry tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	yaml := []byte("name: a\nruntime: yaml\n")
	for _, h := range []tar.Header{{Name: "Pulumi.yaml", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(yaml))}, entry} {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		var content []byte
		if h.Name == "Pulumi.yaml" {
			content = yaml
		} else if h.Size > 0 {
			content = []byte("bad")
		}
		if _, err := tw.Write(content); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A program folder that leaves the tree is refused before anything runs.
func TestWorkDirOutsideTheTreeIsRefused(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-workdir", tree, digest, runner.Spec{WorkDir: "../.."})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	o := c.podOptions(op.ID, cred)
	if err := RunPod(context.Background(), o); err != nil {
		t.Fatalf("RunPod: %v", err)
	}
	res := c.result(op.ID)
	if res.Outcome != runner.OutcomeFailed || res.ErrorClass != runner.ErrorProgram || !contains(res.Message, "outside") {
		t.Errorf("want a failed program result: %+v", res)
	}
}
