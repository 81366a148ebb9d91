package postgres_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/dev/internal/postgres"
)

// crashChildEnv makes the test binary the owner of a server that
// TestCrashLeavesNothing kills.
const crashChildEnv = "STACKPILOT_PG_CRASH_CHILD"

// TestCrashLeavesNothing kills (SIGKILL) the process that started a server, so
// none of its cleanup runs: the server must die with it, and the next Start
// must remove its directory.
func TestCrashLeavesNothing(t *testing.T) {
	if os.Getenv(crashChildEnv) == "1" {
		s, err := postgres.Start(context.Background(), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("CHILD READY %s %d\n", s.Dir, s.Port)
		time.Sleep(10 * time.Minute)
		return
	}
	requirePostgres(t)
	g := NewWithT(t)
	child := exec.Command(os.Args[0], "-test.run=^TestCrashLeavesNothing$", "-test.v")
	child.Env = append(os.Environ(), crashChildEnv+"=1")
	out, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	child.Stderr = os.Stderr
	g.Expect(child.Start()).To(Succeed())
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	var dir string
	var lines []string // the child's output: why it failed, when it does
	s := bufio.NewScanner(out)
	for s.Scan() {
		lines = append(lines, s.Text())
		if f := strings.Fields(s.Text()); len(f) == 4 && f[0] == "CHILD" && f[1] == "READY" {
			dir = f[2]
			break
		}
	}
	g.Expect(dir).NotTo(BeEmpty(), "the child never started its server:\n%s", strings.Join(lines, "\n"))
	g.Expect(dir).To(BeADirectory())
	postmaster := postmasterPid(g, dir)
	g.Expect(syscall.Kill(postmaster, 0)).To(Succeed())

	g.Expect(child.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = child.Wait()
	g.Eventually(func() error { return syscall.Kill(postmaster, 0) }, time.Minute, 100*time.Millisecond).
		Should(MatchError(syscall.ESRCH), "the server outlived the process that started it")
	g.Expect(dir).To(BeADirectory())

	next, err := postgres.Start(context.Background(), postgres.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	defer next.Stop()
	g.Expect(dir).NotTo(BeADirectory(), "Start left the dead server's directory")
}

func postmasterPid(g Gomega, dir string) int {
	data, err := os.ReadFile(dir + "/data/postmaster.pid")
	g.Expect(err).NotTo(HaveOccurred())
	var pid int
	_, err = fmt.Sscan(strings.SplitN(string(data), "\n", 2)[0], &pid)
	g.Expect(err).NotTo(HaveOccurred())
	return pid
}
