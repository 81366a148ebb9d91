// Package controlplane runs a Kubernetes control plane without nodes on this
// machine: etcd, kube-apiserver and kube-controller-manager from the pinned
// binaries (`make tools`), on 127.0.0.1, with fresh certificates. The demo
// runs Stackpilot against it, and the tests do through internal/testenv.
//
// The API server is configured as controller-runtime's envtest configures
// it (RBAC, service-account token signing, no ServiceAccount admission
// plugin), without linking envtest or anything else made for tests.
//
// Why the controller manager: Pulumi's Kubernetes provider deletes with
// foreground propagation, and only the garbage collector removes the
// foregroundDeletion finalizer; without it a replace or destroy hangs until its
// timeout. The namespace controller finishes namespace deletion.
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/stackpilot/stackpilot/internal/daemon"
)

// DefaultControllers are the kube-controller-manager controllers that run
// unless Options.Controllers names others.
var DefaultControllers = []string{"garbage-collector-controller", "namespace-controller"}

// Options configure Start.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	BinDir string
	// Dir receives the data, certificates, kubeconfig and logs. When empty, a
	// temporary directory is made, and Stop removes it.
	Dir string
	// CRDDirs hold CustomResourceDefinition manifests (.yaml, .yml, .json;
	// several documents per file allowed) to install; Start returns once each
	// is Established and served.
	CRDDirs []string
	// Controllers for kube-controller-manager; DefaultControllers when nil.
	Controllers []string
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Config is an admin connection (AdminUser in AdminGroup).
	Config *rest.Config
	// Kubeconfig is a kubeconfig file with the same admin identity, for child
	// processes (the controller, the Pulumi Kubernetes provider, kubectl).
	Kubeconfig string
	// Host is the API server's URL, https://127.0.0.1:<port>.
	Host string
	// Dir holds everything the control plane wrote; logs are <Dir>/<component>.log.
	Dir string

	removeDir            bool
	etcd, apiserver, kcm *daemon.Process
}

// Start brings up etcd, kube-apiserver and kube-controller-manager, installs
// the CRDs and returns once the garbage collector works. On error, whatever
// started is stopped again.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil {
			return nil, fmt.Errorf("controlplane: %s missing from %s: run `make tools` first", name, opts.BinDir)
		}
	}
	c := &ControlPlane{Dir: opts.Dir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "stackpilot-controlplane-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	p, err := newCerts(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("controlplane: certificates: %w", err)
	}
	etcdURL, err := c.startEtcd(ctx, opts.BinDir)
	if err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, opts.BinDir, etcdURL, p); err != nil {
		return nil, err
	}
	controllers := opts.Controllers
	if controllers == nil {
		controllers = DefaultControllers
	}
	if err := c.startControllerManager(opts.BinDir, controllers); err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, c.Config, opts.CRDDirs, c.anyExited); err != nil {
		return nil, err
	}
	if err := waitForGarbageCollector(ctx, c.Config, 90*time.Second, c.anyExited); err != nil {
		return nil, fmt.Errorf("%w; see %s", err, c.kcm.Log)
	}
	return c, nil
}

func (c *ControlPlane) startEtcd(ctx context.Context, bin string) (string, error) {
	port, err := daemon.FreePort()
	if err != nil {
		return "", err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	c.etcd, err = startProc(c.Dir, "etcd", filepath.Join(bin, "etcd"),
		"--name=stackpilot",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+url,
		"--advertise-client-urls="+url,
		"--listen-peer-urls=http://127.0.0.1:0",
		// Throwaway data on a shared disk: no fsync.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return "", err
	}
	if err := waitHealthy(ctx, http.DefaultClient, url+"/health", 60*time.Second, c.etcd); err != nil {
		return "", err
	}
	return url, nil
}

func (c *ControlPlane) startAPIServer(ctx context.Context, bin, etcdURL string, p *certs) error {
	port, err := daemon.FreePort()
	if err != nil {
		return err
	}
	c.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	c.apiserver, err = startProc(c.Dir, "kube-apiserver", filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.Dir, "pki", "generated"),
		"--tls-cert-file="+p.ServingCert,
		"--tls-private-key-file="+p.ServingKey,
		"--client-ca-file="+p.CA,
		"--authorization-mode=RBAC",
		"--service-account-issuer="+c.Host+"/",
		"--service-account-key-file="+p.SAPub,
		"--service-account-signing-key-file="+p.SAKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// Nothing creates the default ServiceAccounts (no token controller
		// runs), so Pods would never be admitted with this plugin; envtest
		// leaves it out for the same reason.
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	c.Config = &rest.Config{
		Host: c.Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.caPEM,
			CertData: p.AdminCert,
			KeyData:  p.AdminKey,
		},
		// Tests create and poll a lot; client-go's default of 5 QPS
		// throttles them. envtest's values.
		QPS:   1000,
		Burst: 2000,
	}
	hc, err := adminHTTPClient(p)
	if err != nil {
		return err
	}
	if err := waitHealthy(ctx, hc, c.Host+"/readyz", 120*time.Second, c.apiserver); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	return writeKubeconfig(c.Kubeconfig, c.Host, p)
}

// startControllerManager serves no HTTPS (--secure-port=0), so nothing
// listens beyond the API server.
func (c *ControlPlane) startControllerManager(bin string, controllers []string) (err error) {
	c.kcm, err = startProc(c.Dir, "kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+c.Kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--v=1",
	)
	return err
}

// anyExited returns the error of the first component that is no longer running.
func (c *ControlPlane) anyExited() error {
	for _, p := range []*daemon.Process{c.etcd, c.apiserver, c.kcm} {
		if p == nil {
			continue
		}
		if err := p.Exited(); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
	}
	return nil
}

// Stop ends every component, newest first, and removes Dir if Start made it.
func (c *ControlPlane) Stop() error {
	var errs []error
	for _, p := range []*daemon.Process{c.kcm, c.apiserver, c.etcd} {
		if p == nil {
			continue
		}
		if err := p.Stop(15 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("controlplane: %w", err))
		}
	}
	if c.removeDir {
		errs = append(errs, os.RemoveAll(c.Dir))
	}
	return errors.Join(errs...)
}

// LogPath is where component ("etcd", "kube-apiserver",
// "kube-controller-manager") writes its log.
func (c *ControlPlane) LogPath(component string) string {
	return filepath.Join(c.Dir, component+".log")
}

func adminHTTPClient(p *certs) (*http.Client, error) {
	cert, err := tls.X509KeyPair(p.AdminCert, p.AdminKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}},
	}, nil
}

// writeKubeconfig writes an admin kubeconfig with everything embedded.
func writeKubeconfig(path, host string, p *certs) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["controlplane"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: p.AdminCert, ClientKeyData: p.AdminKey}
	cfg.Contexts["controlplane"] = &clientcmdapi.Context{Cluster: "controlplane", AuthInfo: AdminUser}
	cfg.CurrentContext = "controlplane"
	return clientcmd.WriteToFile(*cfg, path)
}

// waitHealthy polls url until it answers 200, giving up early when p exits.
func waitHealthy(ctx context.Context, hc *http.Client, url string, timeout time.Duration, p *daemon.Process) error {
	if err := daemon.WaitHTTP(ctx, hc, url, timeout, p); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}
