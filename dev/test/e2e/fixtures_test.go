package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// bridgeProgram writes a ConfigMap whose data comes from config, and exports
// outputs, one of them secret (it comes from a secret config value).
func bridgeProgram(extraData string) string {
	return `name: bridge
runtime: yaml
config:
  namespace:
    type: string
  color:
    type: string
    default: blue
  token:
    type: string
    default: none
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: app-settings
        namespace: ${namespace}
      data:
        color: ${color}` + extraData + `
    options:
      deleteBeforeReplace: true
outputs:
  color: ${color}
  configMap: ${settings.metadata.name}
  token: ${token}
`
}

const passphrase = "e2e-passphrase-c0ffee"

// newFixture makes a namespace with the passphrase Secret, a Git server with the
// bridge program committed, and a controller for that namespace.
type fixture struct {
	ns      string
	git     *testenv.GitServer
	repoURL string
	ctrl    *controllerProcess
	dataDir string
	commit  string
}

func newFixture(t *testing.T, gitOpts ...testenv.GitServerOption) *fixture {
	t.Helper()
	f := &fixture{ns: env.Namespace(t), git: testenv.NewGitServer(t, gitOpts...), dataDir: t.TempDir()}
	f.repoURL = f.git.URL("infra")
	f.commit = f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("")}, "first")
	createSecret(t, f.ns, "pulumi-passphrase", map[string]string{"passphrase": passphrase})
	return f
}

func (f *fixture) start(t *testing.T, args ...string) {
	f.ctrl = startController(t, f.ns, f.dataDir, args...)
}

func (f *fixture) stack(name string, mutate ...func(*v1alpha1.Stack)) *v1alpha1.Stack {
	s := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{
				Git: &v1alpha1.GitSource{URL: f.repoURL, Ref: &v1alpha1.GitRef{Branch: "main"}},
				Dir: "app",
			},
			SecretsProvider: &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: "pulumi-passphrase"}},
			Config: map[string]apiextensionsv1.JSON{
				"namespace":                         {Raw: []byte(fmt.Sprintf("%q", f.ns))},
				"kubernetes:enableConfigMapMutable": {Raw: []byte(`true`)},
			},
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 2 * time.Second},
			Outputs:       &v1alpha1.OutputsTarget{SecretName: name + "-outputs", ConfigMapName: name + "-outputs"},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func createSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func getStack(g Gomega, key client.ObjectKey) *v1alpha1.Stack {
	s := &v1alpha1.Stack{}
	g.Expect(env.Client.Get(context.Background(), key, s)).To(Succeed())
	return s
}

// waitApplied waits until the Stack is Ready at revision (any, when "").
func waitApplied(t *testing.T, key client.ObjectKey, revision string) *v1alpha1.Stack {
	t.Helper()
	var last *v1alpha1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStack(g, key)
		last = s
		g.Expect(conditions.IsReady(s)).To(BeTrue(), "Ready: %s", readyMessage(s))
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		if revision != "" {
			g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(revision))
		}
	}, 4*time.Minute, time.Second).Should(Succeed())
	return last
}

// waitNotReady waits until Ready is False with the given reason.
func waitNotReady(t *testing.T, key client.ObjectKey, reason string) *v1alpha1.Stack {
	t.Helper()
	var last *v1alpha1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStack(g, key)
		last = s
		c := conditions.Get(s, v1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "Ready: %s", readyMessage(s))
		g.Expect(c.Reason).To(Equal(reason), "Ready: %s", readyMessage(s))
		// The patcher writes conditions before the rest of the status: until
		// the second patch lands, the history still shows the operation
		// running, without its message.
		g.Expect(s.Status.CurrentOperation).To(BeNil(), "the operation's record has landed")
	}, 4*time.Minute, time.Second).Should(Succeed())
	return last
}

func readyMessage(s *v1alpha1.Stack) string {
	c := conditions.Get(s, v1alpha1.ReadyCondition)
	if c == nil {
		return "<no Ready condition>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

func configMapData(g Gomega, ns, name string) map[string]string {
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
	return cm.Data
}

// stackEvents returns the messages of the events about a Stack (core and events.k8s.io).
func stackEvents(t *testing.T, ns, name string) []string {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// hasLine is true when one of lines contains sub. Make sub specific: "created"
// alone is in "0 created" too.
func hasLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

func jsonString(v any) (string, error) {
	raw, err := json.Marshal(v)
	return string(raw), err
}

// requestReconcile sets the reconcile-now annotation and returns its value:
// status.lastHandledReconcileAt shows it once the reconcile it asked for ended.
func requestReconcile(t *testing.T, key client.ObjectKey) string {
	t.Helper()
	value := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, value)
	s := &v1alpha1.Stack{}
	s.Name, s.Namespace = key.Name, key.Namespace
	if err := env.Client.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	return value
}

// waitHandled waits until the reconcile asked for with value has ended.
func waitHandled(t *testing.T, key client.ObjectKey, value string) *v1alpha1.Stack {
	t.Helper()
	var last *v1alpha1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		last = getStack(g, key)
		g.Expect(last.Status.LastHandledReconcileAt).To(Equal(value))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	return last
}

func replaceOnce(s, old, new string) string {
	i := strings.Index(s, old)
	if i < 0 {
		panic("replaceOnce: " + old + " not found")
	}
	return s[:i] + new + s[i+len(old):]
}
