package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestConvertWhatWouldMislead (issue 21, item 30 b-d): PKO manifests as its
// examples and `kubectl apply -n` users write them: a Program and a Stack
// without namespaces, a placeholder stack name, a file:// backend and the
// workspace template's ServiceAccount. The conversion pairs the Stack with
// its Program; warns about the stack name, saying what to change, which the
// API server indeed refuses; warns that the file:// backend is now the
// controller's filesystem; and the fixed Stack runs as the template's
// ServiceAccount (refused until that ServiceAccount may act, then Ready).
func TestConvertWhatWouldMislead(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	state := t.TempDir()
	input := `apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: conv-nons
program:
  configuration:
    namespace: {type: String}
  resources:
    page:
      type: kubernetes:core/v1:ConfigMap
      properties:
        metadata: {name: conv-nons, namespace: "${namespace}"}
        data: {greeting: hello}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: conv-nons
spec:
  stack: <your-org>/conv-nons/dev
  programRef: {name: conv-nons}
  backend: file://` + state + `
  config: {namespace: ` + f.ns + `}
  envRefs:
    PULUMI_CONFIG_PASSPHRASE: {type: Secret, secret: {name: pulumi-passphrase, key: passphrase}}
  workspaceTemplate:
    spec:
      serviceAccountName: pko-runner
`
	in := filepath.Join(t.TempDir(), "pko.yaml")
	g.Expect(os.WriteFile(in, []byte(input), 0o644)).To(Succeed())
	programs := t.TempDir()
	stdout, stderr, code := mustPlanCLI(t, f.ns, "convert", "-f", in, "--program-dir", programs,
		"--program-url", f.git.URL("programs"), "--program-ref", "main")
	g.Expect(code).To(Equal(0), stderr)

	// (b) The Program is the Stack's, though neither names a namespace.
	g.Expect(stderr).To(ContainSubstring("wrote " + filepath.Join(programs, "conv-nons", "Pulumi.yaml") + " (Program conv-nons): commit or push it"))
	g.Expect(stderr).NotTo(ContainSubstring("not in the input"))
	// (c) and (d): one warning each, saying what to change.
	g.Expect(stderr).To(ContainSubstring(`warning: Stack conv-nons: spec.stack: "<your-org>/conv-nons/dev" is not a stack name Stackpilot accepts`))
	g.Expect(stderr).To(ContainSubstring("so the API server will refuse this Stack: set spec.stackName to the real stack"))
	g.Expect(stderr).To(ContainSubstring("warning: Stack conv-nons: spec.backend: file://" + state + " was a path inside PKO's workspace Pod"))
	g.Expect(stderr).To(ContainSubstring("in Stackpilot it is a path on the controller's filesystem"))
	g.Expect(stderr).NotTo(ContainSubstring("spec.workspaceTemplate"), "the template held only the ServiceAccount, which carried over")

	yml, err := os.ReadFile(filepath.Join(programs, "conv-nons", "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	f.git.Commit(t, "programs", "main", map[string]string{"conv-nons/Pulumi.yaml": string(yml)}, "converted")

	// Applied as `kubectl apply -n`: the API server refuses the stack name,
	// as the warning said.
	var obj unstructured.Unstructured
	g.Expect(yaml.Unmarshal([]byte(stdout), &obj.Object)).To(Succeed())
	g.Expect(obj.GetKind()).To(Equal(v1alpha1.StackKind))
	obj.SetNamespace(f.ns)
	err = env.Client.Create(ctx, obj.DeepCopy())
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the API server took the placeholder stack name: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("stackName must be a Pulumi stack name"))

	// Fixed as the warning says, it runs as the template's ServiceAccount:
	// refused while that may do nothing, Ready once it may.
	g.Expect(unstructured.SetNestedField(obj.Object, "conv-nons", "spec", "stackName")).To(Succeed())
	sa, _, _ := unstructured.NestedString(obj.Object, "spec", "serviceAccountName")
	g.Expect(sa).To(Equal("pko-runner"))
	createServiceAccount(t, f.ns, "pko-runner")
	g.Expect(env.Client.Create(ctx, &obj)).To(Succeed())
	f.start(t)
	key := client.ObjectKey{Namespace: f.ns, Name: "conv-nons"}
	s := waitNotReady(t, key, v1alpha1.AuthenticationFailedReason)
	g.Expect(readyMessage(s)).To(ContainSubstring(`User "system:serviceaccount:` + f.ns + `:pko-runner" cannot`))
	grant(t, f.ns, "pko-runner", "configmaps")
	waitApplied(t, key, "")
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "conv-nons"}, &cm)).To(Succeed())
	g.Expect(strings.TrimSpace(cm.Data["greeting"])).To(Equal("hello"))
}
