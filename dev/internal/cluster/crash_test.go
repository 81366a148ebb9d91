package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// crashChildEnv makes the test binary the owner of a cluster that
// TestCrashThenUpCleans kills: its value is the cluster's directory.
const crashChildEnv = "STACKPILOT_CRASH_CHILD_DIR"

// TestCrashThenUpCleans kills (SIGKILL) the process that started a cluster
// while a Pod runs on it, so nothing of the cluster's own cleanup runs: the
// container, its shim and mounts outlive it. The next Up in the same directory
// must clean all of that first and come up, and Down must then leave nothing.
func TestCrashThenUpCleans(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(t, dir)
		return
	}
	testenv.RequireCluster(t)
	g := NewWithT(t)
	unlock, err := cluster.LockMachine(context.Background(), os.Stderr)
	g.Expect(err).NotTo(HaveOccurred())
	defer unlock()
	dir, err := os.MkdirTemp("/var/tmp", "spc-crash-")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cluster.Down(dir, nil) }()

	// The owner: this test binary again, starting a cluster and a Pod.
	child := exec.Command(os.Args[0], "-test.run=^TestCrashThenUpCleans$", "-test.v")
	child.Env = append(os.Environ(), crashChildEnv+"="+dir)
	out, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	child.Stderr = os.Stderr
	g.Expect(child.Start()).To(Succeed())
	ready := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "CHILD READY") {
				ready <- s.Text()
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok {
			_ = child.Wait()
			t.Fatalf("the child exited before its Pod ran:\n%s", cluster.ComponentLogs(dir, 20))
		}
		t.Log(line)
	case <-time.After(3 * time.Minute):
		_ = child.Process.Kill()
		t.Fatalf("the child's cluster and Pod were not up within 3 minutes:\n%s", cluster.ComponentLogs(dir, 20))
	}
	g.Expect(child.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = child.Wait()

	// What the crash left: at least the Pod's container (its shim mentions the
	// directory) and mounts under it.
	time.Sleep(time.Second)
	leftPids := cluster.ProcessesMentioning(dir)
	mounts := mountsUnder(dir)
	t.Logf("left by the crash: %d processes, %d mounts", len(leftPids), len(mounts))
	g.Expect(len(leftPids)+len(mounts)).To(BeNumerically(">", 0), "the crash left nothing to clean: the test proves nothing")
	// And the Pod's veth on the cluster's bridge (its other end is in the
	// Pod's network namespace).
	bridge := cluster.BridgeName(dir)
	veths, _ := filepath.Glob(filepath.Join("/sys/class/net", bridge, "brif", "*"))
	g.Expect(veths).NotTo(BeEmpty(), "the crash left no veth on bridge %s", bridge)

	root, bin, err := testenv.Paths()
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	c, err := cluster.Up(context.Background(), cluster.Options{Dir: dir, Root: root, BinDir: bin})
	if err != nil {
		t.Fatalf("up after the crash: %v\n%s", err, cluster.ComponentLogs(dir, 20))
	}
	t.Logf("up again in %s", time.Since(start).Round(100*time.Millisecond))
	for _, pid := range leftPids {
		g.Expect(runner.ProcessAlive(pid)).To(BeFalse(), "process %d of the crashed cluster still runs", pid)
	}
	// The kernel deletes a veth once its network namespace is freed, which
	// it does in the background.
	for _, v := range veths {
		g.Eventually(filepath.Join("/sys/class/net", filepath.Base(v)), time.Minute, 100*time.Millisecond).
			ShouldNot(BeAnExistingFile(), "the crashed Pod's veth is left")
	}
	_, err = c.Smoke(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Down()).To(Succeed())
	g.Expect(cluster.ProcessesMentioning(dir)).To(BeEmpty())
	g.Expect(mountsUnder(dir)).To(BeEmpty())
	g.Expect(dir).NotTo(BeADirectory())
	g.Expect(filepath.Join("/sys/class/net", bridge)).NotTo(BeAnExistingFile(), "bridge left")
}

// crashChild starts a cluster in dir and a Pod on the Pod network that runs
// until stopped, says so on stdout, and waits to be killed.
func crashChild(t *testing.T, dir string) {
	root, bin, err := testenv.Paths()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := cluster.Up(ctx, cluster.Options{Dir: dir, Root: root, BinDir: bin, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "long-running", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "pause",
				Image: c.Registry + "/" + cluster.PauseRepository + ":" + cluster.PauseTag,
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			fmt.Printf("CHILD READY: Pod %s Running on the cluster in %s\n", pod.Name, dir)
			select {} // until killed
		}
	}
	t.Fatal("the Pod did not run within 2 minutes")
}

func mountsUnder(dir string) []string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var under []string
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			under = append(under, fields[4])
		}
	}
	return under
}
