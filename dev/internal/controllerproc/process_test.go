package controllerproc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeControllerEnv makes this test binary act as a controller: see
// TestMain.
const fakeControllerEnv = "STACKPILOT_FAKE_CONTROLLER"

// TestMain: run as the fake controller, the binary fails its first start
// the way a controller whose port another process took fails (a bind
// error, exit 1), and serves /readyz on --health-probe-bind-address on
// the next.
func TestMain(m *testing.M) {
	if os.Getenv(fakeControllerEnv) == "" {
		os.Exit(m.Run())
	}
	var probes string
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-address="); ok {
			probes = v
		}
	}
	tries := filepath.Join(os.Getenv(fakeControllerEnv), "tries")
	f, _ := os.OpenFile(tries, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	_, _ = f.WriteString("x")
	_ = f.Close()
	if data, _ := os.ReadFile(tries); len(data) == 1 {
		fmt.Println("stackpilot-controller: error listening on 127.0.0.1:12516: listen tcp 127.0.0.1:12516: bind: address already in use")
		os.Exit(1)
	}
	http.HandleFunc("/readyz", func(http.ResponseWriter, *http.Request) {})
	fmt.Println(http.ListenAndServe(probes, nil))
	os.Exit(1)
}

// TestStartAgainOnATakenPort: a start that failed on a taken port is made
// again, on other ports, and the second answers; the first's log stays.
func TestStartAgainOnATakenPort(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := Start(ctx, Config{Binary: self, BinDir: dir, DataDir: dir, Env: []string{fakeControllerEnv + "=" + dir}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Stop()
	if data, _ := os.ReadFile(filepath.Join(dir, "tries")); string(data) != "xx" {
		t.Fatalf("the controller was started %d times, want 2", len(data))
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "controller-*.log"))
	if len(logs) != 2 {
		t.Fatalf("logs %v: want the failed start's and the second's", logs)
	}
}
