package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// kubeconfigQuotingProgram reads the operation's kubeconfig (beside the
// work tree: <operation dir>/kubeconfig, the program being in tree/app) and
// names a ConfigMap after it: the API server refuses the name and quotes it
// whole in its error, bearer token included, as a program that prints its
// kubeconfig in an error would.
const kubeconfigQuotingProgram = `name: bridge
runtime: yaml
config:
  namespace:
    type: string
variables:
  kubeconfig:
    fn::readFile: ../../kubeconfig
resources:
  leak:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: ${kubeconfig}
        namespace: ${namespace}
      data:
        a: b
`

// TestTokenNeverInEngineLog: the operation's ServiceAccount token reaches
// the program only as a file named by KUBECONFIG; a program whose error
// quotes that file must not put the token into the engine log that
// `stackpilot logs` serves, nor into status or events.
func TestTokenNeverInEngineLog(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	cliBinary(t)
	f := newFixture(t)
	commit := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": kubeconfigQuotingProgram}, "quote the kubeconfig")
	createServiceAccount(t, f.ns, "deployer")
	grant(t, f.ns, "deployer", "configmaps")

	ip := hostIP(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	g.Expect(ln.Close()).To(Succeed())
	f.start(t, fmt.Sprintf("--logs-bind-address=%s:%d", ip, port))
	exposeLogs(t, f.ns, ip, port)

	stack := f.stack("quoter", func(s *v1alpha1.Stack) {
		s.Spec.ServiceAccountName = "deployer"
		s.Spec.Outputs = nil
		// No retry: `stackpilot logs` shows the newest operation, and a retry
		// that has just started has an empty log.
		s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitNotReady(t, key, v1alpha1.ProgramErrorReason)
	g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(commit))
	// The API server did quote the kubeconfig: its server address is there.
	g.Expect(readyMessage(s)).To(ContainSubstring("invalid resource name"))
	g.Expect(readyMessage(s)).To(ContainSubstring("current-context"))

	reader := serviceAccountKubeconfig(t, f.ns, "log-reader", true)
	out, errOut, code := logsCLI(t, reader, f.ns, "logs", s.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("invalid resource name"), "the log holds the error")
	g.Expect(out).To(ContainSubstring("current-context"), "the log holds the quoted kubeconfig")
	g.Expect(out).NotTo(ContainSubstring(jwtPrefix), "no bearer token in `stackpilot logs`")
	g.Expect(out).To(ContainSubstring("[secret]"))

	// The engine log files themselves, and everything else a reader sees.
	logs := 0
	g.Expect(filepath.WalkDir(f.dataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err == nil {
			logs++
			g.Expect(string(data)).NotTo(ContainSubstring(jwtPrefix), path)
		}
		return nil
	})).To(Succeed())
	g.Expect(logs).To(BeNumerically(">", 0), "engine logs were found under %s", f.dataDir)
	statusJSON, err := jsonString(s.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statusJSON).NotTo(ContainSubstring(jwtPrefix))
	for _, e := range stackEvents(t, f.ns, stack.Name) {
		g.Expect(e).NotTo(ContainSubstring(jwtPrefix))
	}
	g.Expect(f.ctrl.Logs(t)).NotTo(ContainSubstring(jwtPrefix))
}
