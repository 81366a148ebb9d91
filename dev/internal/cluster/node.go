package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startNode starts containerd and the kubelet and waits until the node is Ready.
func (c *Cluster) startNode(ctx context.Context, opts Options, p *certs) error {
	cfg := filepath.Join(c.Dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(c.containerdConfig()), 0o644); err != nil {
		return err
	}
	// containerd loads the first configuration in the directory (and adds
	// loopback itself): the bridge.
	if err := os.WriteFile(filepath.Join(c.Dir, "cni", "10-bridge.conflist"), []byte(c.podNet.cniConfig(c.Dir)), 0o644); err != nil {
		return err
	}
	containerd, err := c.startProc("containerd", []string{"containerd", "--config=" + cfg, "--log-level=warn"}, nil)
	if err != nil {
		return err
	}
	if err := c.poll(ctx, 60*time.Second, "containerd's socket", func() (bool, error) {
		conn, err := net.DialTimeout("unix", c.containerdSocket(), time.Second)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	}); err != nil {
		return fmt.Errorf("%w; see %s", err, containerd.Log)
	}

	kubeletCfg := filepath.Join(c.Dir, "kubelet.yaml")
	if err := os.WriteFile(kubeletCfg, []byte(c.kubeletConfig(p)), 0o644); err != nil {
		return err
	}
	kubelet, err := c.startProc("kubelet", []string{filepath.Join(opts.BinDir, "kubelet"),
		"--config=" + kubeletCfg,
		"--kubeconfig=" + filepath.Join(c.Dir, "kubeconfig-kubelet"),
		"--root-dir=" + filepath.Join(c.Dir, "kubelet"),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "kubelet"),
		"--hostname-override=" + c.NodeName,
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://127.0.0.1:"+strconv.Itoa(c.KubeletHealthzPort)+"/healthz", 120*time.Second, kubelet); err != nil {
		return fmt.Errorf("cluster: kubelet: %w", err)
	}
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	// Ready, and without the not-ready taint the kubelet registers with (the
	// node lifecycle controller removes it): then Pods schedule.
	return c.poll(ctx, 120*time.Second, "node "+c.NodeName+" Ready and schedulable", func() (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		for _, t := range node.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
				return false, nil
			}
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}
