package analyzer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/policy"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestMain lets the test binary be the analyzer: Pulumi starts it through
// the link Link makes, under AnalyzerName, as the runner's binary is.
func TestMain(m *testing.M) {
	if Invoked() {
		os.Exit(Main())
	}
	code := m.Run()
	kube.Stop()
	os.Exit(code)
}

var kube testenv.Lazy

// project is a Pulumi YAML program with one ConfigMap in ns.
type project struct {
	t                     *testing.T
	dir, bundle, eventLog string
	link, bin             string
	env                   []string
}

func newProject(t *testing.T, b Bundle) *project {
	t.Helper()
	env := kube.Get(t)
	tmp := t.TempDir()
	p := &project{t: t, dir: filepath.Join(tmp, "program"), eventLog: filepath.Join(tmp, "events.jsonl"), bin: env.BinDir}
	for _, d := range []string{p.dir, filepath.Join(tmp, "state"), filepath.Join(tmp, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if p.link, err = Link(filepath.Join(tmp, "analyzer"), self); err != nil {
		t.Fatal(err)
	}
	if p.bundle, err = WriteBundle(tmp, b); err != nil {
		t.Fatal(err)
	}
	p.env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "PULUMI_BACKEND_URL=file://"+filepath.Join(tmp, "state"),
		"PULUMI_HOME="+filepath.Join(tmp, "home"), "PULUMI_CONFIG_PASSPHRASE=test", BundleEnv+"="+p.bundle,
		// --event-log needs it, as the runner's CLI does.
		"PULUMI_DEBUG_COMMANDS=true")
	for k, v := range testenv.PulumiEnv(env.BinDir) {
		p.env = append(p.env, k+"="+v)
	}
	p.program("default", "private")
	p.pulumi("stack", "init", "dev")
	return p
}

func (p *project) program(ns, acl string) {
	p.t.Helper()
	src := fmt.Sprintf(`name: guarded
runtime: yaml
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: settings
        namespace: %s
      data:
        acl: %s
`, ns, acl)
	if err := os.WriteFile(filepath.Join(p.dir, "Pulumi.yaml"), []byte(src), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *project) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "pulumi"), append([]string{"--non-interactive", "--color", "never"}, args...)...)
	cmd.Dir, cmd.Env = p.dir, p.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (p *project) pulumi(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// up runs `pulumi up` with the analyzer, as the runner does, and returns its
// output and error.
func (p *project) up() (string, error) {
	_ = os.Remove(p.eventLog)
	return p.run("up", "--yes", "--skip-preview", "--policy-pack", p.link, "--event-log", p.eventLog)
}

// policyEvents are the event log's policyEvent entries.
func (p *project) policyEvents() []map[string]any {
	p.t.Helper()
	f, err := os.Open(p.eventLog)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			PolicyEvent map[string]any `json:"policyEvent"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.PolicyEvent != nil {
			out = append(out, e.PolicyEvent)
		}
	}
	return out
}

// A mandatory rule stops the create before the ConfigMap exists; the event
// log names the rule, the resource and the message; the fixed program
// applies, with an advisory finding reported and nothing stopped by it.
func TestAnalyzerStopsAViolatingCreateInsideTheEngine(t *testing.T) {
	env := kube.Get(t)
	ns := env.Namespace(t)
	guard := policy.Policy{Kind: "StackPolicy", Namespace: ns, Name: "guardrails", Rules: []policy.Rule{
		{Name: "private-settings", Match: policy.Match{Types: []string{"kubernetes:core/v1:ConfigMap"}, Operations: []policy.Operation{policy.Create, policy.Update}},
			Expression:        "resource.inputs.data.acl == 'private'",
			MessageExpression: "'ConfigMap ' + resource.name + ' would be ' + resource.inputs.data.acl"},
		{Name: "owner-label", Enforcement: policy.Advisory, Match: policy.Match{Types: []string{"kubernetes:*"}},
			Expression: "has(resource.inputs.metadata.labels) && 'owner' in resource.inputs.metadata.labels",
			Message:    "label every resource with its owner"},
	}}
	p := newProject(t, Bundle{Stack: policy.Stack{Namespace: ns, Name: "app"}, Policies: []policy.Policy{guard},
		Prior: map[string]map[string]any{}})

	p.program(ns, "public")
	out, err := p.up()
	if err == nil {
		t.Fatalf("up with a mandatory violation succeeded:\n%s", out)
	}
	var cm corev1.ConfigMap
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); !apierrors.IsNotFound(err) {
		t.Fatalf("the ConfigMap exists after a refused create (err %v)", err)
	}
	t.Logf("up refused:\n%s", out)
	events := p.policyEvents()
	mandatory := find(events, "mandatory")
	if mandatory == nil {
		t.Fatalf("no mandatory policyEvent in the event log: %v\n%s", events, out)
	}
	if mandatory["policyName"] != "StackPolicy/"+ns+"/guardrails/private-settings" ||
		!strings.HasSuffix(fmt.Sprint(mandatory["resourceUrn"]), "kubernetes:core/v1:ConfigMap::settings") ||
		!strings.Contains(fmt.Sprint(mandatory["message"]), "ConfigMap settings would be public") {
		t.Errorf("the mandatory event does not name the rule, the resource and the message: %v", mandatory)
	}
	if !strings.Contains(out, "would be public") {
		t.Errorf("pulumi's output does not show the violation:\n%s", out)
	}

	p.program(ns, "private")
	if out, err := p.up(); err != nil {
		t.Fatalf("the fixed program did not apply: %v\n%s", err, out)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil || cm.Data["acl"] != "private" {
		t.Fatalf("ConfigMap after the fixed up: %v %v", cm.Data, err)
	}
	advisory := find(p.policyEvents(), "advisory")
	if advisory == nil || !strings.Contains(fmt.Sprint(advisory["message"]), "label every resource") {
		t.Errorf("no advisory event for the missing owner label: %v", p.policyEvents())
	}
}

func find(events []map[string]any, level string) map[string]any {
	for _, e := range events {
		if e["enforcementLevel"] == level {
			return e
		}
	}
	return nil
}
