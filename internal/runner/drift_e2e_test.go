package runner

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// driftProgram owns a ConfigMap declared in the YAML (its ignored paths go
// into options.ignoreChanges), a ConfigMap made by a component (not declared
// in the YAML: it can only be excluded as a whole) and a Secret.
const driftProgram = `name: kube
runtime: yaml
config:
  namespace: {type: string}
  kubeconfig: {type: string}
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
          pulumi.com/patchForce: "true"
      data:
        a: one
        b: two
    options:
      provider: ${provider}
  group:
    type: kubernetes:yaml/v2:ConfigGroup
    properties:
      objs:
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: grouped
            namespace: ${namespace}
            annotations:
              pulumi.com/patchForce: "true"
          data:
            c: three
    options:
      provider: ${provider}
  sec:
    type: kubernetes:core/v1:Secret
    properties:
      metadata:
        name: sec
        namespace: ${namespace}
        annotations:
          pulumi.com/patchForce: "true"
      stringData:
        password: program-password
    options:
      provider: ${provider}
`

// The drift check reports the full property paths; a remediating up with
// IgnoreChanges restores what is not ignored, leaves the ignored path as the
// world has it, and excludes the resource the YAML does not declare. No value
// of the PATCHed Secret is in any Result.
func TestRunDriftPathsAndIgnoreChanges(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, driftProgram)
	if err := testenv.RequireBinaries(e.bin, "pulumi-resource-kubernetes"); err != nil {
		t.Fatal(err)
	}
	kube := kubeEnv(t)
	ns := kube.Namespace(t)
	config := []ConfigValue{{Key: "namespace", Value: ns}, {Key: "kubeconfig", Value: kube.Kubeconfig}}
	cmURN := "urn:pulumi:dev::kube::kubernetes:core/v1:ConfigMap::cm"
	secURN := "urn:pulumi:dev::kube::kubernetes:core/v1:Secret::sec"
	const secret = "s3cr3t-out-of-band-9431"
	noSecret := func(res Result) {
		t.Helper()
		out, err := json.Marshal(res)
		g.Expect(err).NotTo(HaveOccurred())
		for _, v := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), "program-password",
			base64.StdEncoding.EncodeToString([]byte("program-password"))} {
			g.Expect(string(out)).NotTo(ContainSubstring(v), "a Secret value in the %s result", res.Type)
		}
	}
	data := func(name string) map[string]string {
		var cm corev1.ConfigMap
		g.Expect(kube.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
		return cm.Data
	}
	patch := func(obj client.Object, name, p string) {
		obj.SetNamespace(ns)
		obj.SetName(name)
		g.Expect(kube.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(p)))).To(Succeed())
	}

	up := e.run(e.spec(OpUp, config...))
	g.Expect(up.Outcome).To(Equal(OutcomeSucceeded), up.Message)
	noSecret(up)

	patch(&corev1.ConfigMap{}, "app-config", `{"data":{"a":"changed-a","b":"changed-b"}}`)
	patch(&corev1.ConfigMap{}, "grouped", `{"data":{"c":"changed-c"}}`)
	patch(&corev1.Secret{}, "sec", `{"stringData":{"password":"`+secret+`"}}`)

	drift := e.run(e.spec(OpDriftCheck, config...))
	g.Expect(drift.Outcome).To(Equal(OutcomeSucceeded), drift.Message)
	noSecret(drift)
	byURN := map[string]ResourceChange{}
	for _, rc := range drift.Resources {
		byURN[rc.URN] = rc
	}
	g.Expect(byURN).To(HaveKey(cmURN))
	g.Expect(byURN[cmURN].Paths).To(Equal([]string{"data.a", "data.b"}))
	g.Expect(byURN[cmURN].Properties).To(Equal([]string{"data"}))
	g.Expect(byURN).To(HaveKey(secURN))
	g.Expect(byURN[secURN].Paths).NotTo(BeEmpty())
	var groupedURN string
	for urn, rc := range byURN {
		if strings.Contains(urn, "ConfigGroup$kubernetes:core/v1:ConfigMap::") {
			groupedURN = urn
			g.Expect(rc.Paths).To(Equal([]string{"data.c"}))
		}
	}
	g.Expect(groupedURN).NotTo(BeEmpty(), "the component's ConfigMap drifted: %v", drift.Resources)

	// Remediate, ignoring what the check saw on a and on the grouped ConfigMap.
	spec := e.spec(OpUp, config...)
	spec.Refresh = true
	spec.IgnoreChanges = map[string][]string{cmURN: {"data.a"}, groupedURN: {"data.c"}}
	fix := e.run(spec)
	g.Expect(fix.Outcome).To(Equal(OutcomeSucceeded), fix.Message)
	noSecret(fix)
	g.Expect(fix.Excluded).To(Equal([]string{groupedURN}))
	g.Expect(data("app-config")).To(Equal(map[string]string{"a": "changed-a", "b": "two"}))
	g.Expect(data("grouped")).To(Equal(map[string]string{"c": "changed-c"}))
	var sec corev1.Secret
	g.Expect(kube.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "sec"}, &sec)).To(Succeed())
	g.Expect(string(sec.Data["password"])).To(Equal("program-password"), "not ignored: restored")

	// The refresh took a's value into the state, so a is no drift any more;
	// the excluded ConfigMap was neither refreshed nor updated: its drift stays.
	after := e.run(e.spec(OpDriftCheck, config...))
	g.Expect(after.Outcome).To(Equal(OutcomeSucceeded), after.Message)
	noSecret(after)
	left := map[string][]string{}
	for _, rc := range after.Resources {
		left[rc.URN] = rc.Paths
	}
	g.Expect(left).To(Equal(map[string][]string{groupedURN: {"data.c"}}))
	g.Expect(data("app-config")).To(HaveKeyWithValue("a", "changed-a"))
}
