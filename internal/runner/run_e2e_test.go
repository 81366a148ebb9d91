package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// These tests run the real pinned Pulumi CLI and YAML language host from bin/.

const passphrase = "correct horse battery staple"

// e2e is one stack in a fresh file:// backend; each operation gets a fresh copy
// of the program, as the executor gives it.
type e2e struct {
	t       *testing.T
	bin     string
	program string
	backend string
	state   string
	home    string
	env     map[string]string
}

func newE2E(t *testing.T, program string) *e2e {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the Pulumi CLI")
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.RequireBinaries(bin, "pulumi", "pulumi-language-yaml"); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state") // not created: the runner creates it
	env := testenv.PulumiEnv(bin)
	env["PULUMI_CONFIG_PASSPHRASE"] = passphrase
	return &e2e{t: t, bin: bin, program: program, backend: "file://" + state, state: state,
		home: t.TempDir(), env: env}
}

func (e *e2e) spec(typ OperationType, config ...ConfigValue) Spec {
	e.t.Helper()
	dir := e.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(e.program), 0o600); err != nil {
		e.t.Fatal(err)
	}
	env := map[string]string{}
	for k, v := range e.env {
		env[k] = v
	}
	return Spec{
		APIVersion: APIVersion, ID: strings.ReplaceAll(e.t.Name(), "/", "-") + "-" + string(typ), Type: typ,
		WorkDir: dir, StackName: "dev", Backend: e.backend, PulumiHome: e.home,
		PulumiCommand: filepath.Join(e.bin, "pulumi"), Config: config, Env: env,
		Timeout: Duration(5 * time.Minute),
	}
}

func (e *e2e) run(spec Spec) Result {
	e.t.Helper()
	res := Run(context.Background(), spec)
	e.t.Logf("%s: outcome=%s class=%s changes=%+v resources=%+v message=%q",
		spec.Type, res.Outcome, res.ErrorClass, res.Changes, res.Resources, res.Message)
	return res
}

const configProgram = `name: cfgtest
runtime: yaml
config:
  settings:
    type: object
  replicas:
    type: integer
  token:
    type: string
  vault:
    type: object
outputs:
  name: ${settings.name}
  firstTag: ${settings.tags[0]}
  replicas: ${replicas}
  token: ${token}
  vaultPort: ${vault.port}
`

func TestRunUpConfigOutputsAndSecrets(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, configProgram)
	config := []ConfigValue{
		{Key: "settings", Value: map[string]any{"name": "web", "tags": []any{"a", "b"}}},
		{Key: "cfgtest:replicas", Value: 3},
		{Key: "token", Value: "s3cr3t-t0ken", Secret: true},
		{Key: "vault", Value: map[string]any{"port": 8200, "password": "hunter2-hunter2"}, Secret: true},
	}

	up := e.run(e.spec(OpUp, config...))
	g.Expect(up.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(up.ErrorClass).To(Equal(ErrorNone))
	g.Expect(up.Changes.Create).To(Equal(1), "the stack resource")
	g.Expect(up.Outputs).To(Equal(map[string]Output{
		"name":      {Value: "web"},
		"firstTag":  {Value: "a"},
		"replicas":  {Value: float64(3)},
		"token":     {Value: "s3cr3t-t0ken", Secret: true},
		"vaultPort": {Value: "8200", Secret: true}, // secure leaves decrypt to strings, as with the CLI
	}))
	g.Expect(up.FinishedAt).To(BeTemporally(">=", up.StartedAt))

	// A second run from a fresh work dir: the stack file has no encryption salt,
	// the secrets manager comes from the state.
	preview := e.run(e.spec(OpPreview, config...))
	g.Expect(preview.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(preview.Changes).To(Equal(ChangeCounts{Same: 1}))
	g.Expect(preview.Resources).To(BeEmpty())

	// Outputs read back from the state, secret ones decrypted, with no config
	// and no engine run: what the controller restores published outputs from.
	read := e.run(e.spec(OpOutputs))
	g.Expect(read.Outcome).To(Equal(OutcomeSucceeded), read.Message)
	g.Expect(read.Outputs).To(Equal(up.Outputs))
	g.Expect(read.Changes).To(Equal(ChangeCounts{}))

	destroy := e.run(e.spec(OpDestroy, config...))
	g.Expect(destroy.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(destroy.Changes.Delete).To(Equal(1))

	// The shared PULUMI_HOME keeps no trace of the operations' work dirs.
	g.Expect(filepath.Glob(filepath.Join(e.home, "workspaces", "*"))).To(BeEmpty())
}

// TestRunOutputsOfMissingStack: reading outputs never creates a stack.
func TestRunOutputsOfMissingStack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, configProgram)
	res := e.run(e.spec(OpOutputs))
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.Message).To(ContainSubstring("no stack named"))
	g.Expect(e.run(e.spec(OpOutputs)).Message).To(ContainSubstring("no stack named"), "the failed read created the stack")
}

func TestRunProgramErrorCarriesPulumiDiagnostic(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, `name: broken
runtime: yaml
outputs:
  value: ${undefinedThing}
`)
	res := e.run(e.spec(OpUp))
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorProgram))
	g.Expect(res.Message).To(ContainSubstring("undefinedThing"))
	g.Expect(res.Message).NotTo(ContainSubstring("\x1b["))
}

func TestRunMessageNeverHoldsEnvValues(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	// The undefined name in the program's error is also the value of an env var:
	// it must not appear in the message.
	e := newE2E(t, `name: leaky
runtime: yaml
outputs:
  value: ${topSecretName42}
`)
	spec := e.spec(OpPreview)
	spec.Env["SOME_TOKEN"] = "topSecretName42"
	res := e.run(spec)
	g.Expect(res.ErrorClass).To(Equal(ErrorProgram))
	g.Expect(res.Message).NotTo(BeEmpty())
	g.Expect(res.Message).NotTo(ContainSubstring("topSecretName42"))
	g.Expect(res.Message).To(ContainSubstring(Redacted))
}

func TestRunWrongPassphraseIsAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, configProgram)
	config := []ConfigValue{
		{Key: "settings", Value: map[string]any{"name": "web", "tags": []any{"a"}}},
		{Key: "replicas", Value: 1},
		{Key: "token", Value: "tok-tok-tok", Secret: true},
		{Key: "vault", Value: map[string]any{"port": 1}, Secret: true},
	}
	g.Expect(e.run(e.spec(OpUp, config...)).Outcome).To(Equal(OutcomeSucceeded))

	spec := e.spec(OpUp, config...)
	spec.Env["PULUMI_CONFIG_PASSPHRASE"] = "wrong passphrase"
	res := e.run(spec)
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorAuth))
	g.Expect(res.Message).NotTo(ContainSubstring("wrong passphrase"))
}

func TestRunLockedStackAndClearStaleLock(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, "name: locky\nruntime: yaml\noutputs:\n  x: 1\n")
	g.Expect(e.run(e.spec(OpUp)).Outcome).To(Equal(OutcomeSucceeded))
	host, err := os.Hostname()
	g.Expect(err).NotTo(HaveOccurred())
	started := time.Now().Add(-time.Minute)

	// A lock left by a runner of ours killed mid-update, as the DIY backend
	// writes it: this host, a pid that no longer runs.
	lockDir := filepath.Join(e.state, ".pulumi", "locks", "organization", "locky", "dev")
	g.Expect(os.MkdirAll(lockDir, 0o700)).To(Succeed())
	writeLock := func(name, hostname string, pid int) {
		lock, _ := json.Marshal(map[string]any{"pid": pid, "username": "runner", "hostname": hostname, "timestamp": time.Now()})
		g.Expect(os.WriteFile(filepath.Join(lockDir, name+".json"), lock, 0o600)).To(Succeed())
	}
	writeLock("6f1c0b52-3c2d-4d5e-9f00-0123456789ab", host, deadPid(t))

	locked := e.run(e.spec(OpUp))
	g.Expect(locked.Outcome).To(Equal(OutcomeConflict))
	g.Expect(locked.ErrorClass).To(Equal(ErrorLocked))
	g.Expect(locked.Message).To(ContainSubstring("locked"))
	g.Expect(locked.Message).To(ContainSubstring("pulumi cancel"), "says how to clear it by hand")

	spec := e.spec(OpUp)
	spec.StaleLock = &StaleLock{Host: host, NotBefore: started}
	cleared := e.run(spec)
	g.Expect(cleared.Outcome).To(Equal(OutcomeSucceeded), cleared.Message)
	g.Expect(cleared.ClearedLocks).To(Equal(1))

	// Nothing left to clear.
	again := e.run(spec)
	g.Expect(again.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(again.ClearedLocks).To(Equal(0))

	// A lock of another host, whose Pod may still run: kept, and named.
	writeLock("7f1c0b52-3c2d-4d5e-9f00-0123456789ab", "other-pod", 4242)
	foreign := e.run(spec)
	g.Expect(foreign.Outcome).To(Equal(OutcomeConflict))
	g.Expect(foreign.ErrorClass).To(Equal(ErrorLocked))
	g.Expect(foreign.Message).To(ContainSubstring("host other-pod, pid 4242"))
	g.Expect(filepath.Glob(filepath.Join(lockDir, "*.json"))).To(HaveLen(1), "the foreign lock stays")
}

// gatedProgram's ConfigMap is created, then the provider waits until it carries
// the label proceed=yes: an engine that runs until told otherwise.
const gatedProgram = `name: gated
runtime: yaml
config:
  namespace:
    type: string
  kubeconfig:
    type: string
resources:
  provider:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${kubeconfig}
  gate:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: gate
        namespace: ${namespace}
        annotations:
          pulumi.com/waitFor: "jsonpath={.metadata.labels.proceed}=yes"
      data:
        x: "1"
    options:
      provider: ${provider}
`

func TestRunTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	t.Run("before the engine starts", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		e := newE2E(t, "name: slow\nruntime: yaml\n")
		spec := e.spec(OpUp)
		spec.Timeout = Duration(time.Millisecond)
		res := e.run(spec)
		g.Expect(res.Outcome).To(Equal(OutcomeFailed))
		g.Expect(res.ErrorClass).To(Equal(ErrorTimeout))
		g.Expect(res.Message).To(ContainSubstring("timed out after 1ms"))

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res = Run(ctx, e.spec(OpUp))
		g.Expect(res.Outcome).To(Equal(OutcomeCancelled))
		g.Expect(res.Message).To(Equal("operation cancelled"))
	})
	t.Run("cancelled while the engine runs", func(t *testing.T) {
		t.Parallel()
		res := gatedUp(t, 0, func(cancel context.CancelFunc) { cancel() })
		NewWithT(t).Expect(res.Outcome).To(Equal(OutcomeCancelled), res.Message)
	})
	t.Run("timed out while the engine runs", func(t *testing.T) {
		t.Parallel()
		res := gatedUp(t, 40*time.Second, func(context.CancelFunc) {})
		g := NewWithT(t)
		g.Expect(res.Outcome).To(Equal(OutcomeFailed), res.Message)
		g.Expect(res.ErrorClass).To(Equal(ErrorTimeout))
	})
}

// gatedUp runs an up of gatedProgram until the provider waits on the gate with
// the stack locked, calls stop (or lets the timeout, if set, pass), and checks
// that Pulumi stopped cleanly: no lock, no pending operation in the checkpoint,
// no process left, and the next up runs without clearing anything.
func gatedUp(t *testing.T, timeout time.Duration, stop func(context.CancelFunc)) Result {
	g := NewWithT(t)
	e := newE2E(t, gatedProgram)
	if err := testenv.RequireBinaries(e.bin, "pulumi-resource-kubernetes"); err != nil {
		t.Fatal(err)
	}
	kube := kubeEnv(t)
	ns := kube.Namespace(t)
	config := []ConfigValue{{Key: "namespace", Value: ns}, {Key: "kubeconfig", Value: kube.Kubeconfig}}
	spec := e.spec(OpUp, config...)
	if timeout > 0 {
		spec.Timeout = Duration(timeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() { done <- Run(ctx, spec) }()

	lockGlob := filepath.Join(e.state, ".pulumi", "locks", "organization", "gated", "dev", "*.json")
	gate := client.ObjectKey{Namespace: ns, Name: "gate"}
	g.Eventually(func(g Gomega) {
		g.Expect(filepath.Glob(lockGlob)).NotTo(BeEmpty(), "Pulumi holds the stack lock")
		g.Expect(kube.Client.Get(context.Background(), gate, &corev1.ConfigMap{})).To(Succeed(), "the provider created the gate")
	}, 3*time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Expect(processesIn(spec.WorkDir)).NotTo(BeEmpty(), "the CLI and its plugins run in the work dir")
	stop(cancel)

	var res Result
	g.Eventually(done, 2*time.Minute).Should(Receive(&res))
	t.Logf("outcome=%s class=%s message=%q", res.Outcome, res.ErrorClass, res.Message)
	g.Expect(filepath.Glob(lockGlob)).To(BeEmpty(), "Pulumi released its lock")
	g.Expect(pendingOperations(t, filepath.Join(e.state, ".pulumi", "stacks", "gated", "dev.json"))).To(BeEmpty(),
		"the checkpoint was written: no operation is left pending")
	g.Eventually(func() []string { return processesIn(spec.WorkDir) }, 10*time.Second, 50*time.Millisecond).
		Should(BeEmpty(), "the CLI, the language host and the provider are gone")

	// The gate opens: the next up runs on the state left behind, with no lock to clear.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gate"}}
	g.Expect(kube.Client.Patch(context.Background(), cm,
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"proceed":"yes"}}}`)))).To(Succeed())
	next := e.run(e.spec(OpUp, config...))
	g.Expect(next.Outcome).To(Equal(OutcomeSucceeded), next.Message)
	g.Expect(next.ClearedLocks).To(BeZero())
	return res
}

// pendingOperations reads the operations a DIY backend checkpoint still lists
// as in flight: what a killed engine leaves behind.
func pendingOperations(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the checkpoint: %v", err)
	}
	var cp struct {
		Checkpoint struct {
			Latest struct {
				Pending []any `json:"pending_operations"`
			} `json:"latest"`
		} `json:"checkpoint"`
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatalf("the checkpoint %s: %v", path, err)
	}
	return cp.Checkpoint.Latest.Pending
}

// processesIn lists the live processes whose working directory is under dir:
// the pulumi CLI and its plugins run in the operation's work dir.
func processesIn(dir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err != nil || !strings.HasPrefix(cwd, dir) || !ProcessAlive(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}

func TestRunBadBackendIsBackend(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, "name: nobackend\nruntime: yaml\n")
	spec := e.spec(OpUp)
	// The backend's folder cannot be created: a file sits where a parent should be.
	blocker := filepath.Join(t.TempDir(), "file")
	g.Expect(os.WriteFile(blocker, nil, 0o600)).To(Succeed())
	spec.Backend = "file://" + filepath.Join(blocker, "state")
	res := e.run(spec)
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorBackend))

	spec = e.spec(OpUp)
	spec.Backend = "s3://stackpilot-no-such-bucket?endpoint=127.0.0.1:1&region=us-east-1&s3ForcePathStyle=true"
	spec.Env["AWS_ACCESS_KEY_ID"], spec.Env["AWS_SECRET_ACCESS_KEY"] = "id", "secret"
	res = e.run(spec)
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorBackend))
}

const configMapProgram = `name: kube
runtime: yaml
config:
  namespace:
    type: string
  kubeconfig:
    type: string
  greeting:
    type: string
resources:
  provider:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${kubeconfig}
      enableConfigMapMutable: true
  cm:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: app-config
        namespace: ${namespace}
        annotations:
          # Take fields back from whoever edited them (server-side apply).
          pulumi.com/patchForce: "true"
      data:
        greeting: ${greeting}
    options:
      provider: ${provider}
outputs:
  configMap: ${cm.metadata.name}
`

func TestRunKubernetesUpdateDriftAndDestroy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, configMapProgram)
	if err := testenv.RequireBinaries(e.bin, "pulumi-resource-kubernetes"); err != nil {
		t.Fatal(err)
	}
	kube := kubeEnv(t)
	ns := kube.Namespace(t)
	config := func(greeting string) []ConfigValue {
		return []ConfigValue{{Key: "namespace", Value: ns}, {Key: "kubeconfig", Value: kube.Kubeconfig},
			{Key: "greeting", Value: greeting}}
	}
	cmURN := "urn:pulumi:dev::kube::kubernetes:core/v1:ConfigMap::cm"
	greeting := func() string {
		var cm corev1.ConfigMap
		if err := kube.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app-config"}, &cm); err != nil {
			return "error: " + err.Error()
		}
		return cm.Data["greeting"]
	}

	up := e.run(e.spec(OpUp, config("hello")...))
	g.Expect(up.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(up.Changes.Create).To(Equal(3), "stack, provider, config map")
	g.Expect(up.Resources).To(ContainElement(ResourceChange{URN: cmURN, Type: "kubernetes:core/v1:ConfigMap", Op: "create"}))
	g.Expect(up.Outputs).To(HaveKeyWithValue("configMap", Output{Value: "app-config"}))
	g.Expect(greeting()).To(Equal("hello"))

	up = e.run(e.spec(OpUp, config("hi")...))
	g.Expect(up.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(up.Changes).To(Equal(ChangeCounts{Update: 1, Same: 2}))
	g.Expect(up.Resources).To(Equal([]ResourceChange{
		{URN: cmURN, Type: "kubernetes:core/v1:ConfigMap", Op: "update", Properties: []string{"data"},
			Paths: []string{"data.greeting"}}}))
	g.Expect(greeting()).To(Equal("hi"))

	noop := e.run(e.spec(OpDriftCheck, config("hi")...))
	g.Expect(noop.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(noop.Resources).To(BeEmpty())

	// Someone edits the ConfigMap behind Pulumi's back.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"}}
	g.Expect(kube.Client.Patch(context.Background(), cm,
		client.RawPatch(types.MergePatchType, []byte(`{"data":{"greeting":"drifted"}}`)))).To(Succeed())

	for range 2 { // a drift check changes nothing, so it reports the same twice
		drift := e.run(e.spec(OpDriftCheck, config("hi")...))
		g.Expect(drift.Outcome).To(Equal(OutcomeSucceeded))
		g.Expect(drift.Resources).To(ConsistOf(
			ResourceChange{URN: cmURN, Type: "kubernetes:core/v1:ConfigMap", Op: "update", Properties: []string{"data"},
				Paths: []string{"data.greeting"}}))
		g.Expect(drift.Changes.Update).To(Equal(1))
	}

	// Remediation: refresh, then put the program's value back.
	spec := e.spec(OpUp, config("hi")...)
	spec.Refresh = true
	fix := e.run(spec)
	g.Expect(fix.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(fix.Resources).To(Equal([]ResourceChange{
		{URN: cmURN, Type: "kubernetes:core/v1:ConfigMap", Op: "update", Properties: []string{"data"},
			Paths: []string{"data.greeting"}}}))
	g.Expect(greeting()).To(Equal("hi"))
	g.Expect(e.run(e.spec(OpDriftCheck, config("hi")...)).Resources).To(BeEmpty())

	destroy := e.run(e.spec(OpDestroy, config("hi")...))
	g.Expect(destroy.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(destroy.Changes.Delete).To(Equal(3))
	g.Eventually(greeting, 30*time.Second).Should(ContainSubstring("not found"))
}

func TestRunKubernetesProviderRefusalIsAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, configMapProgram)
	if err := testenv.RequireBinaries(e.bin, "pulumi-resource-kubernetes"); err != nil {
		t.Fatal(err)
	}
	kube := kubeEnv(t)
	// A kubeconfig whose user the API server does not know.
	raw, err := os.ReadFile(kube.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.Load(raw)
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range cfg.AuthInfos {
		a.ClientCertificateData, a.ClientKeyData, a.Token = nil, nil, "not-a-valid-token"
	}
	bad := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(clientcmd.WriteToFile(*cfg, bad)).To(Succeed())

	res := e.run(e.spec(OpUp, ConfigValue{Key: "namespace", Value: "default"},
		ConfigValue{Key: "kubeconfig", Value: bad}, ConfigValue{Key: "greeting", Value: "x"}))
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorAuth))
	g.Expect(res.Message).NotTo(BeEmpty())
}
