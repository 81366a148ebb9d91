package reaper

import (
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

// The test binary plays the processes of the test, by role.
const (
	roleEnv = "STACKPILOT_REAPER_TEST_ROLE"
	dirEnv  = "STACKPILOT_REAPER_TEST_DIR"
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "init":
		// PID 1 of a new PID namespace: reaps; its child (the same binary, not PID
		// 1) plays the controller.
		if code, ok := RunAsInit(); ok {
			os.Exit(code)
		}
		os.Exit(workload())
	case "orphan-maker":
		// Starts a process and exits without waiting for it: the kernel hands it
		// to PID 1, which must reap it when it ends.
		c := helper("orphan")
		if err := c.Start(); err != nil {
			os.Exit(3)
		}
		writeFile("orphan", strconv.Itoa(c.Process.Pid))
		os.Exit(0)
	case "orphan":
		time.Sleep(2 * time.Second)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// workload plays the controller under init: it makes an orphan, then ends with
// code 42 when it gets SIGTERM (forwarded by init).
func workload() int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if err := helper("orphan-maker").Run(); err != nil {
		return 4
	}
	writeFile("ready", strconv.Itoa(os.Getpid()))
	select {
	case <-term:
		writeFile("terminated", "")
		return 42
	case <-time.After(time.Minute):
		return 5
	}
}

func helper(role string) *exec.Cmd {
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), roleEnv+"="+role)
	return c
}

func writeFile(name, content string) {
	dir := os.Getenv(dirEnv)
	_ = os.WriteFile(filepath.Join(dir, name+".tmp"), []byte(content), 0o600)
	_ = os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name))
}

func TestNotPID1DoesNothing(t *testing.T) {
	code, ok := RunAsInit()
	NewWithT(t).Expect(ok).To(BeFalse())
	NewWithT(t).Expect(code).To(BeZero())
}

// procStatus reads the fields of /proc/<pid>/status ("State", "PPid", "NSpid").
func procStatus(pid int) map[string]string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// children lists the processes whose parent is pid, with their status.
func children(pid int) map[int]map[string]string {
	out := map[int]map[string]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st := procStatus(p); st != nil && st["PPid"] == strconv.Itoa(pid) {
			out[p] = st
		}
	}
	return out
}

func TestInitReapsOrphansAndForwardsSignals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process in a new PID namespace (CLONE_NEWPID)")
	}
	g := NewWithT(t)
	dir := t.TempDir()
	cmd := helper("init")
	cmd.Env = append(cmd.Env, dirEnv+"="+dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	g.Expect(cmd.Start()).To(Succeed())
	defer func() { _ = cmd.Process.Kill() }()
	initPid := cmd.Process.Pid
	g.Expect(procStatus(initPid)["NSpid"]).To(HaveSuffix("\t1"), "init is PID 1 of its namespace")

	g.Eventually(filepath.Join(dir, "ready"), 20*time.Second, 20*time.Millisecond).Should(BeAnExistingFile())
	data, err := os.ReadFile(filepath.Join(dir, "orphan"))
	g.Expect(err).NotTo(HaveOccurred())
	orphanNSPid := strings.TrimSpace(string(data))

	// The orphan, still sleeping, now belongs to init.
	var orphan int
	for pid, st := range children(initPid) {
		if f := strings.Fields(st["NSpid"]); len(f) == 2 && f[1] == orphanNSPid {
			orphan = pid
		}
	}
	g.Expect(orphan).NotTo(BeZero(), "the orphan was handed to PID 1; children of init: %v", children(initPid))

	// When it ends, init reaps it: no zombie is left.
	g.Eventually(func() map[string]string { return procStatus(orphan) }, 10*time.Second, 50*time.Millisecond).
		Should(BeNil(), "the orphan must be reaped, not left a zombie")
	for pid, st := range children(initPid) {
		g.Expect(st["State"]).NotTo(HavePrefix("Z"), "zombie %d under init", pid)
	}

	// SIGTERM to init reaches the workload, whose exit code init exits with.
	g.Expect(syscall.Kill(initPid, syscall.SIGTERM)).To(Succeed())
	err = cmd.Wait()
	exit, ok := err.(*exec.ExitError)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(exit.ExitCode()).To(Equal(42))
	g.Expect(filepath.Join(dir, "terminated")).To(BeAnExistingFile())
}
