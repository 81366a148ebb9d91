package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/internal/toolchain"
)

// RequireClusterEnv, set to 1, turns a skipped cluster test into a failed one:
// `make test` sets it when it runs as root, so that CI cannot pass by skipping
// the install test on a machine that should run it.
const RequireClusterEnv = "STACKPILOT_REQUIRE_CLUSTER"

// ClusterRequirements says why this machine cannot run the one-node cluster of
// dev/internal/cluster (nil: it can): not root, containerd/runc/CNI plugins
// missing, or tools missing from bin/.
func ClusterRequirements() error {
	if err := cluster.Requirements(); err != nil {
		return err
	}
	bin, err := BinDir()
	if err != nil {
		return err
	}
	return RequireBinaries(bin, toolchain.ClusterTools...)
}

// RequireCluster skips t when this machine cannot run the one-node cluster,
// saying why, or fails it when RequireClusterEnv is 1.
func RequireCluster(t testing.TB) {
	t.Helper()
	if err := ClusterRequirements(); err != nil {
		if os.Getenv(RequireClusterEnv) == "1" {
			t.Fatalf("%s=1 but this machine cannot run the one-node cluster: %v", RequireClusterEnv, err)
		}
		t.Skipf("no one-node cluster on this machine: %v", err)
	}
}

// Cluster is a one-node cluster started for one test.
type Cluster struct {
	*cluster.Cluster
	Root, BinDir string
	// Kubectl is bin/kubectl.
	Kubectl string
	// Client is an admin client with scheme's types.
	Client client.Client
}

// StartCluster starts a one-node cluster for t (dev/internal/cluster.Up in a fresh
// directory under /var/tmp) and takes it down when t ends, checking that no
// mount is left. On failure, the components' logs go to t's log. It skips t
// when the machine cannot run a cluster, or fails it if RequireClusterEnv is 1.
func StartCluster(t testing.TB, scheme *runtime.Scheme) *Cluster {
	t.Helper()
	RequireCluster(t)
	root, bin, err := Paths()
	if err != nil {
		t.Fatalf("%v", err)
	}
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	log := tbWriter{t}
	// One cluster at a time on this machine; tests of other packages wait.
	unlock, err := cluster.LockMachine(context.Background(), log)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(unlock)
	// A short directory (containerd's socket lives in it); first remove what
	// an earlier run, killed before its cleanup, left there.
	if err := cluster.CleanStale("/var/tmp/spc-*", log); err != nil {
		t.Fatalf("clean up earlier clusters: %v", err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "spc-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	c, err := cluster.Up(context.Background(), cluster.Options{Dir: dir, Root: root, BinDir: bin, Log: log})
	if err != nil {
		logs := cluster.ComponentLogs(dir, 30)
		_ = cluster.Down(dir, nil)
		t.Fatalf("cluster up: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster components' logs:\n%s", cluster.ComponentLogs(dir, 15))
		}
		if err := c.Down(); err != nil {
			t.Errorf("cluster down: %v", err)
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mounts), dir) {
			t.Errorf("mounts left under %s after the cluster went down", dir)
		}
	})
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatalf("%v", err)
	}
	k, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return &Cluster{Cluster: c, Root: root, BinDir: bin, Kubectl: filepath.Join(bin, "kubectl"), Client: k}
}

// tbWriter writes each line to a test's log.
type tbWriter struct{ t testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
