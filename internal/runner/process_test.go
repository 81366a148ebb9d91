package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The test binary re-executes itself to play the processes of these tests; the
// role is chosen by this environment variable.
const (
	helperRoleEnv = "STACKPILOT_RUNNER_TEST_ROLE"
	helperDirEnv  = "STACKPILOT_RUNNER_TEST_DIR"
)

func helperMain(role string) int {
	dir := os.Getenv(helperDirEnv)
	switch role {
	case "sleeper":
		time.Sleep(time.Hour)
	case "slow-cli":
		// Plays a pulumi CLI whose steps in flight take 11s to finish after SIGINT,
		// longer than the Automation API's own command waits before killing it.
		sigint := make(chan os.Signal, 1)
		signal.Notify(sigint, os.Interrupt)
		_ = os.WriteFile(filepath.Join(dir, "started"), nil, 0o600)
		<-sigint
		time.Sleep(11 * time.Second)
		_ = os.WriteFile(filepath.Join(dir, "released"), nil, 0o600)
		return 1
	case "controller":
		// Plays the controller: starts a runner the way the Local executor does,
		// waits until it is set up, then dies without cleaning up.
		cmd := helperCommand("runner", dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if os.Getenv("WITH_PDEATHSIG") != "" {
			cmd.SysProcAttr.Pdeathsig = ParentDeathSignal
		}
		if err := cmd.Start(); err != nil {
			return 1
		}
		waitForFile(filepath.Join(dir, "pids"), 10*time.Second)
		return 0
	case "runner":
		// Plays the runner: a grandchild in its own group (like the pulumi CLI) and
		// one leading a group of its own (like a plugin), then supervise as Main does.
		inGroup := helperCommand("sleeper", dir)
		plugin := helperCommand("sleeper", dir)
		plugin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if inGroup.Start() != nil || plugin.Start() != nil {
			return 1
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer supervise(ctx, cancel, slog.New(slog.NewTextHandler(io.Discard, nil)))()
		pids := fmt.Sprintf("%d %d %d", os.Getpid(), inGroup.Process.Pid, plugin.Process.Pid)
		_ = os.WriteFile(filepath.Join(dir, "pids.tmp"), []byte(pids), 0o600)
		_ = os.Rename(filepath.Join(dir, "pids.tmp"), filepath.Join(dir, "pids"))
		select {
		case <-ctx.Done():
			_ = os.WriteFile(filepath.Join(dir, "cancelled"), nil, 0o600)
			_ = inGroup.Process.Kill()
			_ = plugin.Process.Kill()
			return 0
		case <-time.After(time.Minute):
			return 3
		}
	}
	return 2
}

func helperCommand(role, dir string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperRoleEnv+"="+role, helperDirEnv+"="+dir)
	return cmd
}

func waitForFile(path string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

func readPids(t *testing.T, dir string) []int {
	t.Helper()
	if !waitForFile(filepath.Join(dir, "pids"), 10*time.Second) {
		t.Fatal("the helper runner did not start")
	}
	data, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	return pids
}

func anyAlive(pids []int) func() []int {
	return func() []int {
		var live []int
		for _, p := range pids {
			if ProcessAlive(p) {
				live = append(live, p)
			}
		}
		return live
	}
}

func TestOrphanedRunnerKillsItsProcessTree(t *testing.T) {
	for _, tc := range []struct {
		name, pdeathsig string
	}{
		{"parent death signal", "1"}, // what the Local executor asks for
		{"parent polling", ""},       // a runner started without one
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			ctrl := helperCommand("controller", dir)
			ctrl.Env = append(ctrl.Env, "WITH_PDEATHSIG="+tc.pdeathsig)
			g.Expect(ctrl.Run()).To(Succeed())
			pids := readPids(t, dir)
			g.Eventually(anyAlive(pids), 10*time.Second, 50*time.Millisecond).Should(BeEmpty(),
				"runner, its grandchild and the plugin-like group leader must all die")
			g.Expect(filepath.Join(dir, "cancelled")).NotTo(BeAnExistingFile(), "an orphan is killed, not cancelled")
		})
	}
}

func TestSignalCancelsTheOperation(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	r := helperCommand("runner", dir)
	r.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g.Expect(r.Start()).To(Succeed())
	pids := readPids(t, dir)
	g.Expect(syscall.Kill(pids[0], syscall.SIGTERM)).To(Succeed())
	g.Expect(r.Wait()).To(Succeed(), "with its parent alive, SIGTERM cancels and the runner ends normally")
	g.Expect(filepath.Join(dir, "cancelled")).To(BeAnExistingFile())
}

func TestKillProcessTree(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	r := helperCommand("runner", dir)
	r.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g.Expect(r.Start()).To(Succeed())
	pids := readPids(t, dir)
	KillProcessTree(pids[0])
	_ = r.Wait()
	g.Eventually(anyAlive(pids), 30*time.Second, 50*time.Millisecond).Should(BeEmpty())
}

// TestCancelGivesTheCLITimeToStop: a cancelled operation's CLI gets SIGINT and
// as long as it needs to finish and release the lock, not the SDK's 10s.
func TestCancelGivesTheCLITimeToStop(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("takes 11s")
	}
	g := NewWithT(t)
	dir := t.TempDir()
	cli := &pulumiCLI{path: os.Args[0], workDir: dir, grace: InterruptGrace,
		env: append(os.Environ(), helperRoleEnv+"=slow-cli", helperDirEnv+"="+dir)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cli.run(ctx, nil, nil, "up")
		done <- err
	}()
	g.Eventually(filepath.Join(dir, "started"), 10*time.Second, 20*time.Millisecond).Should(BeAnExistingFile())
	cancel()
	g.Eventually(done, 30*time.Second).Should(Receive(HaveOccurred()))
	g.Expect(filepath.Join(dir, "released")).To(BeAnExistingFile(), "the CLI was killed before it finished stopping")
}
