package cluster_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/controllerproc"
)

// High availability with the Job executor, in the one-node cluster. The
// replicas are processes on this machine like the fixture's controller,
// each standing for a Pod of the controller's namespace: a real Pod (the
// pause image) whose readiness is the process's /readyz (the kubelet
// probes it on loopback) and whose named port "runner" is the process's
// runner port. The stackpilot-runner Service is config/manager's, so its
// EndpointSlices are the endpoints controller's answer to its selector.
// This cluster has no kube-proxy: a proxy in the test plays it, sending
// each connection to the runner endpoint, at random, of a ready endpoint
// of that Service (the port is the process's, on the Pod gateway).
//
// Everything lives in the namespace "default", the fixture controller's
// own (its digest key is there: the replicas keep the Stack's inputs
// digest, so the takeover runs nothing new).
const haNamespace = "default"

// haReplica is one replica: its process and the Pod it stands for.
type haReplica struct {
	name    string
	cfg     controllerproc.Config
	proc    *controllerproc.Process
	dataDir string
}

type haPair struct {
	f        *jobFixture
	replicas [2]*haReplica
	proxy    net.Listener
}

// startHAPair stops the fixture's controller and starts two replicas with
// --leader-elect behind the runner Service; a leads, b stands by.
func (f *jobFixture) startHAPair(t *testing.T) *haPair {
	g := NewWithT(t)
	g.Expect(f.ctrl.Stop()).To(Succeed())

	p := &haPair{f: f}
	f.runnerService(t)
	var err error
	p.proxy, err = net.Listen("tcp", net.JoinHostPort(f.c.PodGateway, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	go p.serveProxy()
	endpoint := fmt.Sprintf("https://%s:%d", f.c.PodGateway, p.proxy.Addr().(*net.TCPAddr).Port)

	for i, name := range []string{"stackpilot-controller-a", "stackpilot-controller-b"} {
		runnerPort, err := freePortOn(f.c.PodGateway)
		g.Expect(err).NotTo(HaveOccurred())
		probes, err := controllerproc.FreeAddr()
		g.Expect(err).NotTo(HaveOccurred())
		r := &haReplica{name: name, dataDir: filepath.Join(t.TempDir(), name)}
		r.cfg = f.ctrlCfg
		r.cfg.DataDir = r.dataDir
		r.cfg.ProbeAddr = probes
		r.cfg.Env = []string{"POD_NAME=" + name, "POD_NAMESPACE=" + haNamespace}
		// Later flags win: the runner channel behind the Service.
		r.cfg.Args = append(append([]string{}, f.ctrlCfg.Args...),
			"--leader-elect", "--leader-election-namespace="+haNamespace,
			"--runner-endpoint="+endpoint,
			fmt.Sprintf("--runner-bind-address=%s:%d", f.c.PodGateway, runnerPort))
		f.standInPod(t, name, runnerPort, probes)
		p.replicas[i] = r
	}
	p.start(t, 0)
	g.Eventually(func(g Gomega) { g.Expect(p.leaders(g)).To(Equal([]string{p.replicas[0].name})) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	p.start(t, 1)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range p.replicas {
				if r.proc != nil {
					logs, _ := r.proc.Logs()
					t.Logf("%s log:\n%s", r.name, tailLines(logs, 60))
				}
			}
		}
	})
	return p
}

// stop stops both replicas and the proxy and starts the fixture's single
// controller again.
func (p *haPair) stop(t *testing.T) {
	for _, r := range p.replicas {
		if r.proc != nil {
			_ = r.proc.Stop()
		}
	}
	_ = p.proxy.Close()
	p.f.startController()
}

func (p *haPair) start(t *testing.T, i int) {
	r := p.replicas[i]
	proc, err := controllerproc.Start(context.Background(), r.cfg)
	if err != nil {
		t.Fatalf("start %s: %v", r.name, err)
	}
	r.proc = proc
}

// leaders are the Pods that carry the leader label.
func (p *haPair) leaders(g Gomega) []string {
	var pods corev1.PodList
	g.Expect(p.f.k.List(context.Background(), &pods, client.InNamespace(haNamespace),
		client.MatchingLabels{"stackpilot.dev/leader": "true"})).To(Succeed())
	var out []string
	for _, pod := range pods.Items {
		out = append(out, pod.Name)
	}
	return out
}

// endpoints are the Pods the runner Service sends to: its ready endpoints.
func (p *haPair) endpoints(g Gomega) []string {
	var out []string
	for _, ep := range p.readyEndpoints(g) {
		out = append(out, ep.pod)
	}
	return out
}

type runnerEndpoint struct {
	pod  string
	port int32
}

func (p *haPair) readyEndpoints(g Gomega) []runnerEndpoint {
	var slices discoveryv1.EndpointSliceList
	g.Expect(p.f.k.List(context.Background(), &slices, client.InNamespace(haNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: "stackpilot-runner"})).To(Succeed())
	var out []runnerEndpoint
	for _, s := range slices.Items {
		if len(s.Ports) != 1 || s.Ports[0].Port == nil {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready && ep.TargetRef != nil {
				out = append(out, runnerEndpoint{pod: ep.TargetRef.Name, port: *s.Ports[0].Port})
			}
		}
	}
	return out
}

// serveProxy is kube-proxy's part: each connection to the Service goes to
// one of its ready endpoints, at random; none refuses it at once.
func (p *haPair) serveProxy() {
	for {
		conn, err := p.proxy.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			var eps []runnerEndpoint
			g := NewGomega(func(string, ...int) {})
			func() {
				defer func() { _ = recover() }()
				eps = p.readyEndpoints(g)
			}()
			if len(eps) == 0 {
				return
			}
			ep := eps[rand.IntN(len(eps))]
			up, err := net.DialTimeout("tcp", net.JoinHostPort(p.f.c.PodGateway, strconv.Itoa(int(ep.port))), 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			var wg sync.WaitGroup
			wg.Go(func() { _, _ = io.Copy(up, conn); _ = up.(*net.TCPConn).CloseWrite() })
			_, _ = io.Copy(conn, up)
			_ = conn.(*net.TCPConn).CloseWrite()
			wg.Wait()
		}()
	}
}

// runnerService creates config/manager's stackpilot-runner Service, as
// installed, in the replicas' namespace.
func (f *jobFixture) runnerService(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(f.c.Root, "config", "manager", "service.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	for {
		var svc corev1.Service
		if err := dec.Decode(&svc); err != nil {
			g.Expect(err).To(Equal(io.EOF), "config/manager/service.yaml")
			break
		}
		if svc.Name != "stackpilot-runner" {
			continue
		}
		svc.Namespace = haNamespace
		g.Expect(f.k.Create(context.Background(), &svc)).To(Succeed())
		t.Cleanup(func() { _ = f.k.Delete(context.Background(), &svc) })
		return
	}
	t.Fatal("config/manager/service.yaml has no stackpilot-runner Service")
}

// standInPod is the Pod a replica process stands for: the controller's
// labels, the runner port by name, ready while the process answers /readyz.
func (f *jobFixture) standInPod(t *testing.T, name string, runnerPort int, probeAddr string) {
	host, port, err := net.SplitHostPort(probeAddr)
	if err != nil {
		t.Fatal(err)
	}
	probePort, _ := strconv.Atoi(port)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: haNamespace,
			Labels: map[string]string{"app.kubernetes.io/name": "stackpilot-controller"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptrTo(int64(1)),
			Containers: []corev1.Container{{
				Name: "manager", Image: f.pause,
				Ports: []corev1.ContainerPort{{Name: "runner", ContainerPort: int32(runnerPort), Protocol: corev1.ProtocolTCP}},
				// The kubelet probes from the host: the process's /readyz.
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: host, Port: intstr.FromInt(probePort), Path: "/readyz"}},
					PeriodSeconds: 1, FailureThreshold: 1,
				},
			}},
		},
	}
	g := NewWithT(t)
	g.Expect(f.k.Create(context.Background(), pod)).To(Succeed())
	t.Cleanup(func() {
		_ = f.k.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
	})
	g.Eventually(func(g Gomega) {
		var got corev1.Pod
		g.Expect(f.k.Get(context.Background(), client.ObjectKeyFromObject(pod), &got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
}

// leaseHolder is the holder of the replicas' Lease.
func (p *haPair) leaseHolder(g Gomega) string {
	var l coordinationv1.Lease
	g.Expect(p.f.k.Get(context.Background(), client.ObjectKey{Namespace: haNamespace, Name: "stackpilot-controller-leader"}, &l)).To(Succeed())
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func ptrTo[T any](v T) *T { return &v }

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// haReadyAfter is how long the failover's ups wait: long enough that the
// leader is stopped mid-up (right after the up applied the Deployment), not
// longer. Should a takeover outlast it, the Pod keeps its result until the
// new leader takes it (opchannel's delivery retries), so the test still
// holds.
const haReadyAfter = 20

// testHAFailover is TestJobExecutor's step "two replicas": an up's Job
// outlives the leader, SIGKILLed, and then the next leader, stopped with
// SIGTERM; each time the replica that takes over adopts the Job, and the
// up is recorded once, succeeded, by the operation the Job ran.
func testHAFailover(t *testing.T, f *jobFixture, key client.ObjectKey) string {
	g := NewWithT(t)
	ctx := context.Background()
	// Refresh, as the steps before leave it: run alone after the first
	// step, the ConfigMap its drift check deleted is made again.
	f.patchSpec(key, func(s *v1alpha1.Stack) { s.Spec.Refresh = true })
	f.waitReady(key, "")
	p := f.startHAPair(t)
	defer p.stop(t)
	a, b := p.replicas[0], p.replicas[1]
	// The endpoints controller follows the Pods' readiness and labels.
	g.Eventually(func(g Gomega) {
		g.Expect(p.endpoints(g)).To(Equal([]string{a.name}), "the runner Service sends to the leader only")
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	before := p.leaseHolder(g)

	commit := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": slowJobProgram("cyan", haReadyAfter)}, "slow cyan")
	f.requestReconcile(key)
	f.waitSlowStarted("cyan")
	pod := f.runnerPod(key)
	opID := pod.Labels["stackpilot.dev/operation"]

	// SIGKILL of the leader's process: what its container's death (the OOM
	// killer, a crash) does to it. Nothing runs of it after: no shutdown,
	// no label removed, the Lease not released. The Pod it stands for
	// turns not ready at the kubelet's next probe.
	killed := time.Now()
	a.proc.Kill()
	var leaseTaken, labelled time.Duration
	g.Eventually(func(g Gomega) {
		if h := p.leaseHolder(g); leaseTaken == 0 && h != before && h != "" {
			leaseTaken = time.Since(killed)
		}
		if labelled == 0 && slices.Contains(p.leaders(g), b.name) {
			labelled = time.Since(killed)
		}
		g.Expect(leaseTaken).NotTo(BeZero(), "the standby holds the Lease")
		g.Expect(labelled).NotTo(BeZero(), "the standby labelled its Pod")
		g.Expect(p.endpoints(g)).To(Equal([]string{b.name}), "the runner Service sends to the new leader only")
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
	// The kubelet restarts a killed container in place: its Pod keeps the
	// label, which the restarted process removes before it is ready.
	p.start(t, 0)
	g.Expect(p.leaders(g)).To(Equal([]string{b.name}), "the restarted replica still carries the leader label")

	s := f.waitReady(key, commit)
	ready := time.Since(killed)
	t.Logf("after SIGKILL of the leader: the standby held the Lease after %s, labelled its Pod after %s, the adopted up was Ready after %s",
		leaseTaken.Round(10*time.Millisecond), labelled.Round(10*time.Millisecond), ready.Round(time.Second))
	g.Expect(historyOf(s, commit)).To(Equal([]string{"up succeeded"}), "the Job was not adopted, or the up ran twice")
	g.Expect(s.Status.History[0].ID).To(Equal(opID), "the succeeded up is not the operation the killed leader started")
	g.Expect(s.Status.History[0].Message).NotTo(ContainSubstring("stale lock"))
	g.Expect(f.color()).To(Equal("cyan"))
	// The engine log: the new leader had none of it, and its Pod sent it
	// all again from the start (the offset protocol), where the new
	// leader's logs endpoint serves it.
	engineLog, err := os.ReadFile(filepath.Join(b.dataDir, "logs", string(s.UID), opID+".log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(engineLog)).To(ContainSubstring("kubernetes:core/v1:ConfigMap"))
	f.noRunnerLeft(f.ns)

	// A graceful handover: SIGTERM to the leader while the Job runs. It
	// leaves the up's Job running (an up is not cut on shutdown), removes
	// its label and releases the Lease; the restarted replica takes over
	// at once and adopts the Job.
	commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": slowJobProgram("teal", haReadyAfter)}, "slow teal")
	f.requestReconcile(key)
	f.waitSlowStarted("teal")
	pod = f.runnerPod(key)
	opID = pod.Labels["stackpilot.dev/operation"]
	stopped := time.Now()
	stopErr := make(chan error, 1)
	go func() { stopErr <- b.proc.Stop() }()
	var handedOver time.Duration
	g.Eventually(func(g Gomega) {
		g.Expect(p.leaders(g)).To(Equal([]string{a.name}))
		handedOver = time.Since(stopped)
		g.Expect(p.endpoints(g)).To(Equal([]string{a.name}))
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed(), "the restarted replica leads")
	g.Expect(<-stopErr).To(Succeed())
	b.proc = nil
	s = f.waitReady(key, commit)
	t.Logf("after SIGTERM of the leader: the other replica led and labelled its Pod after %s, the adopted up was Ready after %s",
		handedOver.Round(10*time.Millisecond), time.Since(stopped).Round(time.Second))
	g.Expect(historyOf(s, commit)).To(Equal([]string{"up succeeded"}), "the Job was not adopted, or the up ran twice")
	g.Expect(s.Status.History[0].ID).To(Equal(opID))
	g.Expect(f.color()).To(Equal("teal"))
	f.noRunnerLeft(f.ns)

	// One certificate: the Secret the first replica created.
	var secret corev1.Secret
	g.Expect(f.k.Get(ctx, client.ObjectKey{Namespace: haNamespace, Name: "stackpilot-runner-tls"}, &secret)).To(Succeed())
	for _, r := range p.replicas {
		crt, err := os.ReadFile(filepath.Join(r.dataDir, "runner-tls", "tls.crt"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(crt).To(Equal(secret.Data["ca.crt"]), "%s serves another certificate than the Secret's", r.name)
	}
	return commit
}
