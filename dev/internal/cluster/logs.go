package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ContainerLogs is what every container named container in namespace wrote,
// read from the kubelet's log directory (all Pods, all restarts). The node has
// no routable address, so `kubectl logs` cannot reach the kubelet; this can.
func (c *Cluster) ContainerLogs(namespace, container string) string {
	files, _ := filepath.Glob(filepath.Join(c.Dir, "pod-logs", namespace+"_*", container, "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "==> %s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "==> %s\n%s", f, data)
	}
	return b.String()
}

// ComponentLogs is the end (n lines) of each component's log in <Dir>/logs
// but the audit log,
// for failure reports. The kubelet's every-10s complaints that cadvisor finds
// no stats for this machine's disk are left out.
func ComponentLogs(dir string, n int) string {
	files, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	var b strings.Builder
	for _, f := range files {
		if f == filepath.Join(dir, "logs", "audit.log") {
			continue // one JSON event per request: see Denied
		}
		data, _ := os.ReadFile(f)
		var keep []string
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, "eviction_manager.go") && !strings.Contains(line, "cri_stats_provider.go") {
				keep = append(keep, line)
			}
		}
		fmt.Fprintf(&b, "==> %s\n%s\n", f, Tail(strings.Join(keep, "\n"), n))
	}
	return b.String()
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
