package opchannel

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stackpilot/stackpilot/internal/runner"
)

// The Pod keeps putting its result while the controller does not know the
// operation (it restarted and has not adopted the Job yet: 403), and stops
// with an error when a different result is already there (409).
func TestResultIsRetriedUntilTaken(t *testing.T) {
	var refusals atomic.Int32
	c := newChannel(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/result") && refusals.Add(1) <= 3 {
				http.Error(w, errDenied.Error(), http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-retried", tree, digest, runner.Spec{})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	res := runner.Result{APIVersion: runner.APIVersion, ID: op.ID, Outcome: runner.OutcomeSucceeded}
	client, err := newPodClient(c.podOptions(op.ID, cred))
	if err != nil {
		t.Fatal(err)
	}
	if err := deliver(context.Background(), client, res); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	if n := refusals.Load(); n != 4 {
		t.Errorf("%d attempts, want 4 (3 refused)", n)
	}
	if got := c.result(op.ID); got.Outcome != runner.OutcomeSucceeded {
		t.Errorf("result %+v", got)
	}
	res.Outcome = runner.OutcomeFailed
	if err := deliver(context.Background(), client, res); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("a different result: %v, want a 409 error", err)
	}
}

// The shipper sends the log as it grows, and after a controller restart
// that lost the end of its file, sends again from where the file ends.
func TestShipperResendsWhatARestartLost(t *testing.T) {
	c := newChannel(t, nil)
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-ship", tree, digest, runner.Spec{})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	o := c.podOptions(op.ID, cred)
	client, err := newPodClient(o)
	if err != nil {
		t.Fatal(err)
	}
	podLog := filepath.Join(o.WorkRoot, engineLog)
	progress := filepath.Join(o.WorkRoot, progressJSON)
	sh := &shipper{c: client, logPath: podLog, progressPath: progress}
	appendFile := func(s string) {
		f, err := os.OpenFile(podLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	ship := func() {
		t.Helper()
		if err := sh.ship(context.Background()); err != nil {
			t.Fatalf("ship: %v", err)
		}
	}

	ship() // nothing yet
	appendFile("first line\n")
	ship()
	appendFile(strings.Repeat("big line\n", MaxLogChunkBytes/9+10)) // more than one chunk
	b, _ := json.Marshal(runner.Progress{ID: op.ID, Changes: runner.ChangeCounts{Create: 3}})
	if err := os.WriteFile(progress, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ship()
	if got, want := fileText(t, op.LogFile), fileText(t, podLog); got != want {
		t.Fatalf("the controller has %d log bytes, the Pod %d", len(got), len(want))
	}
	if p, err := runner.ReadProgress(op.ProgressFile); err != nil || p == nil || p.Changes.Create != 3 {
		t.Errorf("progress %+v, %v", p, err)
	}

	// The controller restarts with the first line only and adopts the operation.
	c.srv.Unregister(op.ID)
	if err := os.WriteFile(op.LogFile, []byte("first line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.srv.Adopt(op, CredentialHash(cred)); err != nil {
		t.Fatal(err)
	}
	appendFile("after the restart\n")
	ship()
	if got, want := fileText(t, op.LogFile), fileText(t, podLog); got != want {
		t.Errorf("after the restart the controller has %d log bytes, the Pod %d", len(got), len(want))
	}
}

// HOME and TMPDIR that cannot be written (a read-only root file system) are
// moved under the work root; writable ones are left as they are.
func TestPodEnvMovesUnwritableDirs(t *testing.T) {
	work, tmp := t.TempDir(), t.TempDir()
	t.Setenv("HOME", filepath.Join(work, "does-not-exist"))
	t.Setenv("TMPDIR", tmp)
	if err := podEnv(work); err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv("HOME"); got != filepath.Join(work, "home") {
		t.Errorf("HOME = %q, want it under the work root", got)
	}
	if got := os.Getenv("TMPDIR"); got != tmp {
		t.Errorf("TMPDIR = %q, want %q (writable, kept)", got, tmp)
	}
}

// SIGTERM (the Pod deleted) stops the operation, not the delivery: a Pod
// told to stop while it fetches delivers a cancelled result.
func TestSIGTERMCancelsButDelivers(t *testing.T) {
	fetching := make(chan struct{})
	var once sync.Once
	c := newChannel(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/spec") {
				once.Do(func() { close(fetching) })
				<-r.Context().Done() // a controller that does not answer in time
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: a\nruntime: yaml\n"})
	op := newOp(t, "op-sigterm", tree, digest, runner.Spec{})
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- RunPod(context.Background(), c.podOptions(op.ID, cred)) }()
	<-fetching // RunPod has its SIGTERM handler by now
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RunPod: %v", err)
	}
	if res := c.result(op.ID); res.Outcome != runner.OutcomeCancelled || res.ID != op.ID {
		t.Errorf("want a cancelled result; got %+v", res)
	}
}
