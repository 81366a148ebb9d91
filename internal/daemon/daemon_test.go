package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/procfs"
)

func logFile(t *testing.T) *os.File {
	f, err := os.Create(filepath.Join(t.TempDir(), "d.log"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestExitedAndLog: the output lands in the log, and an ended daemon says so
// with an *ExitedError naming the log.
func TestExitedAndLog(t *testing.T) {
	log := logFile(t)
	p, err := Start("echoer", exec.Command("sh", "-c", "echo hello; echo oops >&2; exit 3"), log)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.Exited() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var exited *ExitedError
	if err := p.Exited(); !errors.As(err, &exited) || exited.Name != "echoer" || !strings.Contains(err.Error(), log.Name()) {
		t.Errorf("Exited: %v; want an *ExitedError naming echoer and %s", err, log.Name())
	}
	if out, _ := os.ReadFile(log.Name()); string(out) != "hello\noops\n" {
		t.Errorf("log %q", out)
	}
}

// TestStopGroup: Stop ends the daemon and what it started (its group), and a
// daemon that ignores SIGTERM is killed after the grace.
func TestStopGroup(t *testing.T) {
	log := logFile(t)
	p, err := Start("stubborn", exec.Command("sh", "-c", "trap '' TERM; sleep 60 & echo $!; wait"), log)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; time.Sleep(20 * time.Millisecond) {
		out, _ := os.ReadFile(log.Name())
		child, _ = strconv.Atoi(strings.TrimSpace(string(out)))
		if time.Now().After(deadline) {
			t.Fatalf("no child pid in the log: %q", out)
		}
	}
	if err := p.Stop(300 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop of a daemon ignoring SIGTERM: %v; want killed", err)
	}
	if p.Exited() == nil {
		t.Error("still running after Stop")
	}
	// The child, orphaned, may linger as a zombie until init reaps it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := procfs.ReadStat(child)
		if err != nil || st.Ended() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's child %d runs on after Stop", child)
		}
	}
}

// TestWaitHTTPGivesUpWhenExited: a daemon that dies at start ends the wait at
// once, not at the timeout.
func TestWaitHTTPGivesUpWhenExited(t *testing.T) {
	p, err := Start("dies", exec.Command("false"), logFile(t))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err = WaitHTTP(context.Background(), http.DefaultClient, "http://127.0.0.1:1/", time.Minute, p)
	var exited *ExitedError
	if !errors.As(err, &exited) {
		t.Fatalf("WaitHTTP: %v; want the *ExitedError", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("gave up after %s", d)
	}
}

func TestWaitHTTPReady(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls++; calls < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if err := WaitHTTP(context.Background(), srv.Client(), srv.URL, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("%d calls, want 3 (two 503s, then 200)", calls)
	}
}

// TestWaitHTTPTimeout: when WaitHTTP gives up, the error holds the server's
// last answer, even when the request in flight at that moment is the one cut
// short. The test ends the wait itself, after the second answer has begun, so
// it does not depend on how fast a loaded machine answers.
func TestWaitHTTPTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 2 {
			cancel() // the client gives up while this answer is being written
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	err := WaitHTTP(ctx, srv.Client(), srv.URL, time.Hour, nil)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("WaitHTTP on a server that stays unavailable: %v; want the last answer, 503", err)
	}
	if err != nil && strings.Contains(err.Error(), "within 1h") {
		t.Errorf("WaitHTTP stopped by its caller says %q; want the cause, not the timeout", err)
	}
}

// TestFreePort: the ports are bindable, below the ephemeral range (where
// ":0" listeners and outgoing connections of other processes cannot take
// them) and never handed out twice.
func TestFreePort(t *testing.T) {
	lo, hi := pickRange()
	seen := map[int]bool{}
	for range 500 {
		port, err := FreePort()
		if err != nil {
			t.Fatalf("FreePort: %v", err)
		}
		if port < lo || port >= hi {
			t.Errorf("FreePort = %d; want it in [%d, %d)", port, lo, hi)
		}
		if seen[port] {
			t.Errorf("FreePort handed out %d twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d from FreePort is not free: %v", port, err)
		}
		l.Close()
	}
}
