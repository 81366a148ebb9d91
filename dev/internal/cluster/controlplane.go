package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// controllers are the kube-controller-manager controllers a one-node cluster
// running Deployments and Jobs needs.
var controllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"job-controller",
	"cronjob-controller",
	"ttl-after-finished-controller",
	"pod-garbage-collector-controller",
	// Removes the not-ready taint the kubelet registers with, once the node is Ready.
	"node-lifecycle-controller",
	"clusterrole-aggregation-controller",
	"disruption-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"persistentvolume-binder-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
}

func (c *Cluster) startControlPlane(ctx context.Context, opts Options, p *certs) error {
	bin := func(name string) string { return filepath.Join(opts.BinDir, name) }
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPort)
	etcd, err := c.startProc("etcd", []string{bin("etcd"),
		"--name=stackpilot",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=http://127.0.0.1:0",
		"--initial-cluster-state=new",
		// A throwaway test cluster on a shared disk: no fsync.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, nil)
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, etcdURL+"/health", 60*time.Second, etcd); err != nil {
		return fmt.Errorf("cluster: etcd: %w", err)
	}

	if err := c.writeAuditPolicy(); err != nil {
		return err
	}
	apiserver, err := c.startProc("kube-apiserver", []string{bin("kube-apiserver"),
		"--etcd-servers=" + etcdURL,
		// Loopback for the host, the Pod network's gateway for Pods: one
		// --bind-address cannot name both. Pods reach no other address of
		// this machine (they have no route to it).
		"--bind-address=0.0.0.0",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.APIServerPort),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "apiserver-generated"),
		"--tls-cert-file=" + p.APIServerCert,
		"--tls-private-key-file=" + p.APIServerKey,
		"--client-ca-file=" + p.CA,
		"--token-auth-file=" + filepath.Join(c.Dir, "pki", "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.SAPub,
		"--service-account-signing-key-file=" + p.SAKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate=" + p.KubeletClientCert,
		"--kubelet-client-key=" + p.KubeletClientKey,
		// The node's only loopback address is its hostname (NodeName).
		"--kubelet-preferred-address-types=Hostname",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--audit-policy-file=" + c.auditPolicyPath(),
		"--audit-log-path=" + c.AuditLogPath(),
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, c.APIServer+"/readyz", 120*time.Second, apiserver, p.CA, p.Tokens["admin"]); err != nil {
		return fmt.Errorf("cluster: kube-apiserver: %w", err)
	}

	kcm := []string{bin("kube-controller-manager"),
		"--kubeconfig=" + filepath.Join(c.Dir, "kubeconfig-controller-manager"),
		"--controllers=" + join(controllers),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.SAKey,
		"--root-ca-file=" + p.CA,
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--v=1",
	}
	if _, err := c.startProc("kube-controller-manager", kcm, nil); err != nil {
		return err
	}
	if _, err := c.startProc("kube-scheduler", []string{bin("kube-scheduler"),
		"--kubeconfig=" + filepath.Join(c.Dir, "kubeconfig-scheduler"),
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}, nil); err != nil {
		return err
	}
	return c.waitForControllers(ctx, 120*time.Second)
}

// waitForControllers waits until the controller manager has given the default
// namespace its ServiceAccount and kube-root-ca.crt: without them no Pod is
// admitted or can mount its token.
func (c *Cluster) waitForControllers(ctx context.Context, timeout time.Duration) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	return c.poll(ctx, timeout, "the default ServiceAccount and kube-root-ca.crt", func() (bool, error) {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}
