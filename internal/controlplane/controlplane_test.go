package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackpilot/stackpilot/internal/toolchain"
)

// TestControlPlane starts the pinned control plane and checks what the demo
// and the tests rely on: the CRDs are served, the kubeconfig works, RBAC is
// enforced and service-account tokens can be requested (TokenRequest), and
// Stop ends every process and removes the directory it made.
func TestControlPlane(t *testing.T) {
	root, bin, err := toolchain.Paths()
	if err != nil {
		t.Fatal(err)
	}
	if err := toolchain.Require(bin, "etcd", "kube-apiserver", "kube-controller-manager"); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	cp, err := Start(ctx, Options{BinDir: bin, CRDDirs: []string{filepath.Join(root, "config", "crd", "bases")}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cp.Stop()
		}
	}()

	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != cp.Host {
		t.Errorf("kubeconfig server %s, want %s", cfg.Host, cp.Host)
	}
	admin := kubernetes.NewForConfigOrDie(cfg)
	if _, err := admin.Discovery().ServerResourcesForGroupVersion("stackpilot.dev/v1alpha1"); err != nil {
		t.Errorf("the Stack CRD is not served: %v", err)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: "default"}}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "runner", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	asSA := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.Config.CAData}})
	_, err = asSA.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a ServiceAccount without roles listing Secrets: %v, want forbidden (RBAC)", err)
	}

	pids := []int{cp.etcd.Cmd.Process.Pid, cp.apiserver.Cmd.Process.Pid, cp.kcm.Cmd.Process.Pid}
	if err := cp.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	stopped = true
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("pid %d still runs after Stop", pid)
		}
	}
	if _, err := os.Stat(cp.Dir); !os.IsNotExist(err) {
		t.Errorf("%s left after Stop: %v", cp.Dir, err)
	}
}

func ptr[T any](v T) *T { return &v }
