package cluster_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/cluster"
)

// hostileReport is what dev/internal/cluster/hostile prints after
// hostileReportPrefix, with the same field names.
type hostileReport struct {
	Operation  string            `json:"operation"`
	Username   string            `json:"username"`
	Files      map[string]string `json:"files"`
	Env        map[string]string `json:"env"`
	Kubernetes map[string]string `json:"kubernetes"`
	Postgres   map[string]string `json:"postgres"`
	Channel    map[string]string `json:"channel"`
	Controls   map[string]string `json:"controls"`
}

const (
	hostileReportPrefix = "HOSTILE-REPORT "
	hostileLoot         = "hostile-loot" // the Secret it tries to create
	// gateCondition holds the victim's Pod un-Ready, and so its up
	// running, until the test sets it.
	gateCondition = "stackpilot.dev/gate"
)

// testHostileProgram: a hostile program in a restricted namespace (the
// fixture's tenant) tries to read the controller's credentials, a Secret
// of another namespace, another Stack's state and another Stack's
// operation through the controller's runner channel. Every attempt is
// refused, nothing is created, its own up still succeeds, and no secret
// value appears in the Stacks' status, the Events, the controller's log or
// the engine logs.
//
// The hostile code is dev/internal/cluster/hostile, put in the user image
// as `pulumi` (Pulumi YAML can neither make requests nor read Secrets). The
// victim's up is held running (its Deployment's Pod has a readiness gate
// only the test opens) for the whole attack, so the operation the attack
// names is registered with the channel, not long gone.
func testHostileProgram(t *testing.T, f *jobFixture) {
	g := NewWithT(t)
	ctx := context.Background()
	image := f.hostileImage(t)

	// The victim: another tenant with a Secret, and a Stack on a database
	// and role of its own, whose up is held running.
	victim := f.tenant("tenant-victim")
	victimValue := "victim-" + randomHex(t)
	g.Expect(f.k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "victim-credentials", Namespace: victim},
		StringData: map[string]string{"token": victimValue},
	})).To(Succeed())
	victimDB, err := f.pg.AddDatabase(ctx, "victim", "victim")
	g.Expect(err).NotTo(HaveOccurred())
	victimCommit := f.git.Commit(t, "victim", "main", map[string]string{"app/Pulumi.yaml": gatedProgram()}, "gated")
	vkey := client.ObjectKey{Namespace: victim, Name: "victim"}
	f.stack(vkey.Name, "victim", func(s *v1alpha1.Stack) {
		s.Namespace = victim
		s.Spec.Backend = victimDB.URLAt(f.c.PodGateway)
		s.Spec.Config["namespace"] = apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", victim))}
		s.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Minute}
	})
	f.gatedPod(t, victim) // the up is past its stack's creation: the state is in the victim's database
	victimOp := f.runnerPod(vkey).Labels["stackpilot.dev/operation"]
	g.Expect(victimOp).NotTo(BeEmpty())

	// The hostile Stack, in the fixture's tenant, with a secret config value.
	apiKey := "hostile-api-key-" + randomHex(t)
	g.Expect(f.k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile-secrets", Namespace: f.ns},
		StringData: map[string]string{"apiKey": apiKey},
	})).To(Succeed())
	hostileCommit := f.git.Commit(t, "hostile", "main", map[string]string{"app/Pulumi.yaml": hostileProgram()}, "hostile")
	hkey := client.ObjectKey{Namespace: f.ns, Name: "hostile"}
	f.stack(hkey.Name, "hostile", func(s *v1alpha1.Stack) {
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "hostile-secrets"}}}
		s.Spec.Runner.Image = image
		s.Spec.Runner.PodTemplate.Spec.Env = append(f.c.PodNetworkEnv(),
			corev1.EnvVar{Name: "HOSTILE_CONTROLLER_PATHS", Value: strings.Join(f.controllerPaths(t), ",")},
			corev1.EnvVar{Name: "HOSTILE_OTHER_NAMESPACE", Value: victim},
			corev1.EnvVar{Name: "HOSTILE_OTHER_SECRET", Value: "victim-credentials"},
			corev1.EnvVar{Name: "HOSTILE_OTHER_DATABASE", Value: victimDB.Database},
			corev1.EnvVar{Name: "HOSTILE_OTHER_OPERATION", Value: victimOp},
		)
	})
	hostile := f.waitReady(hkey, hostileCommit)
	var cm corev1.ConfigMap
	g.Expect(f.k.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hostile-settings"}, &cm)).To(Succeed(), "the hostile Stack's up did not apply")
	g.Expect(cm.Data).To(HaveKeyWithValue("color", "red"))

	// The victim's up, held until now, goes on as the same operation: it was
	// registered all through the attack.
	f.openGate(t, victim)
	vs := f.waitReady(vkey, victimCommit)
	g.Expect(vs.Status.History).To(ContainElement(And(
		HaveField("ID", victimOp), HaveField("Outcome", BeEquivalentTo("succeeded")))),
		"the victim's up %s was not the one that succeeded: %v", victimOp, historyOf(vs, ""))
	f.noRunnerLeft(f.ns)
	f.noRunnerLeft(victim)

	reports := f.hostileReports(t, hostile)
	g.Expect(reports).NotTo(BeEmpty(), "no report in the hostile Stack's engine logs")
	for _, r := range reports {
		checkRefused(t, f, r, victimOp)
	}
	f.checkNothingCreated(t, victim)
	secrets := map[string]string{
		"the passphrase":            passphrase,
		"the victim's Secret":       victimValue,
		"the hostile config secret": apiKey,
		"the tenant's DB password":  f.pg.Password,
		"the victim's DB password":  victimDB.Password,
	}
	f.checkNoSecret(t, secrets, []client.ObjectKey{hkey, vkey}, []string{f.ns, victim})

	// Quiet for what runs next in the fixture (no destroy: not this test's subject).
	for _, key := range []client.ObjectKey{hkey, vkey} {
		if err := f.k.Delete(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
			t.Errorf("delete Stack %s: %v", key, err)
		}
	}
}

// hostileImage is the user image with dev/internal/cluster/hostile as
// `pulumi` and the real CLI beside it as pulumi-real.
func (f *jobFixture) hostileImage(t *testing.T) string {
	ctx := context.Background()
	g := NewWithT(t)
	bin := filepath.Join(t.TempDir(), "hostile")
	g.Expect(cluster.BuildStatic(ctx, filepath.Join(f.c.Root, "dev"), "./internal/cluster/hostile", bin)).To(Succeed())
	spec, err := cluster.PulumiImageSpec(f.c.BinDir)
	g.Expect(err).NotTo(HaveOccurred())
	renamed := false
	for i, b := range spec.Binaries {
		if b.Path == "/usr/local/bin/pulumi" {
			spec.Binaries[i].Path, renamed = "/usr/local/bin/pulumi-real", true
		}
	}
	g.Expect(renamed).To(BeTrue(), "no /usr/local/bin/pulumi in the user image")
	spec.Binaries = append(spec.Binaries, cluster.File{Path: "/usr/local/bin/pulumi", Source: bin})
	img, err := cluster.BuildImage(spec, filepath.Join(f.c.BinDir, ".image-cache", "layers"))
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := cluster.Push(ctx, img, f.c.Registry, "stackpilot/pulumi-hostile", "job-e2e")
	g.Expect(err).NotTo(HaveOccurred())
	return ref
}

// controllerPaths are the controller's files on this machine: its data
// directory, its kubeconfig and the files that kubeconfig names.
func (f *jobFixture) controllerPaths(t *testing.T) []string {
	paths := []string{f.ctrlCfg.DataDir, f.ctrlCfg.Kubeconfig}
	cfg, err := clientcmd.LoadFromFile(f.ctrlCfg.Kubeconfig)
	if err != nil {
		t.Fatalf("read the controller's kubeconfig: %v", err)
	}
	for _, a := range cfg.AuthInfos {
		paths = append(paths, a.ClientCertificate, a.ClientKey, a.TokenFile)
	}
	for _, c := range cfg.Clusters {
		paths = append(paths, c.CertificateAuthority)
	}
	var out []string
	for _, p := range paths {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// hostileProgram makes one ConfigMap; apiKey (from a Secret) is a secret
// config value that only the engine sees.
func hostileProgram() string {
	return `name: hostile
runtime: yaml
config:
  namespace: {type: string}
  image: {type: string}
  apiKey: {type: string}
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata: {name: hostile-settings, namespace: "${namespace}"}
      data: {color: red}
`
}

// gatedProgram is a Deployment whose Pod is Ready only once the test sets
// gateCondition: its up runs until then (for up to 30 minutes).
func gatedProgram() string {
	return `name: victim
runtime: yaml
config:
  namespace: {type: string}
  image: {type: string}
resources:
  gated:
    type: kubernetes:apps/v1:Deployment
    properties:
      metadata: {name: gated, namespace: "${namespace}"}
      spec:
        replicas: 1
        progressDeadlineSeconds: 1800
        selector: {matchLabels: {app: gated}}
        template:
          metadata: {labels: {app: gated}}
          spec:
            terminationGracePeriodSeconds: 1
            readinessGates: [{conditionType: "` + gateCondition + `"}]
            securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
            containers:
              - name: pause
                image: "${image}"
                securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
    options:
      customTimeouts: {create: 30m}
`
}

// gatedPod waits for the gated Deployment's Pod in ns.
func (f *jobFixture) gatedPod(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(f.k.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": "gated"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = &pods.Items[0]
	}, 5*time.Minute, time.Second).Should(Succeed(), "the victim's up made no Pod")
	return pod
}

// openGate sets the gated Pod's readiness gate.
func (f *jobFixture) openGate(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		pod := f.gatedPod(t, ns)
		patched := pod.DeepCopy()
		patched.Status.Conditions = append(patched.Status.Conditions, corev1.PodCondition{
			Type: gateCondition, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		})
		return f.k.Status().Patch(context.Background(), patched, client.StrategicMergeFrom(pod))
	}, time.Minute, time.Second).Should(Succeed())
}

// hostileReports are the reports in the Stack's engine logs, which the
// controller keeps under its data directory (internal/logstore).
func (f *jobFixture) hostileReports(t *testing.T, s *v1alpha1.Stack) []hostileReport {
	files, err := filepath.Glob(filepath.Join(f.ctrlCfg.DataDir, "logs", string(s.UID), "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []hostileReport
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			_, line, ok := strings.Cut(sc.Text(), hostileReportPrefix)
			if !ok {
				continue
			}
			var r hostileReport
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: a report that is not JSON: %v\n%s", file, err, line)
			}
			t.Logf("%s: %s", filepath.Base(file), line)
			out = append(out, r)
		}
	}
	return out
}

// checkRefused says, for each attack of r, what was let through. Every
// check runs: a failure lists them all.
func checkRefused(t *testing.T, f *jobFixture, r hostileReport, victimOp string) {
	t.Helper()
	want := func(what, got string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %s", what, got)
		}
	}
	// The controls: what is the Pod's own works, so a refusal below is one.
	want("control: the Pod's own operation", r.Operation, r.Operation != "" && r.Operation != victimOp)
	for _, c := range []string{"getOwnSecret", "getOwnSpec"} {
		want("control "+c, r.Controls[c], r.Controls[c] == "200")
	}
	want("control readOwnState", r.Controls["readOwnState"], r.Controls["readOwnState"] == "read")

	// 1. The controller's credentials are not in the Pod.
	sa := "system:serviceaccount:" + f.ns + ":" + runnerSA
	want("the Pod's token is not the Stack's ServiceAccount's", r.Username, r.Username == sa)
	want("controller paths checked", fmt.Sprint(r.Files), len(r.Files) == len(f.controllerPaths(t)))
	for p, got := range r.Files {
		want("the controller's "+p+" in the Pod", got, got == "absent")
	}
	want("KUBECONFIG in the Pod", r.Env["KUBECONFIG"], r.Env["KUBECONFIG"] == "unset")

	// 2. Another namespace's Secrets; Secrets made elsewhere.
	for _, a := range []string{"getOtherSecret", "listOtherSecrets", "listAllSecrets", "createSecretKubeSystem", "createSecretOther"} {
		want("kubernetes "+a, r.Kubernetes[a], r.Kubernetes[a] == "403")
	}

	// 3. Another Stack's state: connecting or reading, insufficient_privilege.
	got := r.Postgres["readOtherState"]
	want("postgres readOtherState", got, strings.HasPrefix(got, "connect: 42501 ") || strings.HasPrefix(got, "select: 42501 "))

	// 4. Another operation on the runner channel, with the Pod's credential and with none.
	for _, a := range []string{"otherSpec", "otherArtifact", "otherSpecNoCredential", "otherArtifactNoCredential", "otherLog"} {
		want("channel "+a, r.Channel[a], r.Channel[a] == "403")
	}
}

// checkNothingCreated: no Secret the attack named exists anywhere, and the
// victim's namespace holds only the test's Secrets and its runners'.
func (f *jobFixture) checkNothingCreated(t *testing.T, victim string) {
	t.Helper()
	ctx := context.Background()
	var all corev1.SecretList
	if err := f.k.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	var loot, inVictim []string
	for _, s := range all.Items {
		if s.Name == hostileLoot {
			loot = append(loot, s.Namespace+"/"+s.Name)
		}
		if s.Namespace == victim && s.Labels["app.kubernetes.io/component"] != "runner" {
			inVictim = append(inVictim, s.Name)
		}
	}
	if len(loot) > 0 {
		t.Errorf("the hostile program created %v", loot)
	}
	sort.Strings(inVictim)
	if want := []string{"pulumi-passphrase", "victim-credentials"}; fmt.Sprint(inVictim) != fmt.Sprint(want) {
		t.Errorf("Secrets of %s: %v, want %v", victim, inVictim, want)
	}
}

// checkNoSecret looks for each secret value in the Stacks' status, the
// Events of namespaces, the controller's log and every engine log.
func (f *jobFixture) checkNoSecret(t *testing.T, secrets map[string]string, stacks []client.ObjectKey, namespaces []string) {
	t.Helper()
	ctx := context.Background()
	places := map[string]string{}
	for _, key := range stacks {
		var s v1alpha1.Stack
		if err := f.k.Get(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		status, _ := json.Marshal(s.Status)
		places["status of "+key.String()] = string(status)
	}
	for _, ns := range namespaces {
		var events corev1.EventList
		if err := f.k.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(events.Items)
		places["Events of "+ns] = string(data)
	}
	logs, err := f.ctrl.Logs()
	if err != nil {
		t.Fatal(err)
	}
	places["the controller's log"] = logs
	engine, _ := filepath.Glob(filepath.Join(f.ctrlCfg.DataDir, "logs", "*", "*.log"))
	if len(engine) == 0 {
		t.Errorf("no engine log under %s", f.ctrlCfg.DataDir)
	}
	for _, file := range engine {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		places["engine log "+file] = string(data)
	}
	for what, value := range secrets {
		for where, text := range places {
			if strings.Contains(text, value) {
				t.Errorf("%s is in %s", what, where)
			}
		}
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
