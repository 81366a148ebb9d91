package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// upstreamProgram exports a string, an object and a secret (from secret
// config): the three kinds of values a downstream Stack must get back as they
// were.
const upstreamProgram = `name: network
runtime: yaml
config:
  namespace:
    type: string
  cidr:
    type: string
  token:
    type: string
outputs:
  cidr: ${cidr}
  network:
    cidr: ${cidr}
    subnets:
      - ${cidr}-a
      - ${cidr}-b
  token: ${token}
`

// downstreamProgram writes what it got from the upstream's outputs into a
// ConfigMap (the plain values) and a Secret (the secret one), and exports the
// secret again: its status must show it as a secret.
const downstreamProgram = `name: wired
runtime: yaml
config:
  namespace:
    type: string
  networkCidr:
    type: string
  network:
    type: object
  token:
    type: string
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: wired-settings
        namespace: ${namespace}
      data:
        cidr: ${networkCidr}
        firstSubnet: ${network.subnets[0]}
  credentials:
    type: kubernetes:core/v1:Secret
    properties:
      metadata:
        name: wired-credentials
        namespace: ${namespace}
      stringData:
        token: ${token}
outputs:
  token: ${token}
  firstSubnet: ${network.subnets[0]}
`

// TestStackOutputsWiring: a downstream Stack gets an upstream Stack's outputs
// as config (configFrom stackOutputs), a string renamed, an object as an
// object, a secret as a secret. A changed upstream output, plain or secret,
// reaches the downstream's ConfigMap or Secret within seconds, not at the
// interval (10 min). The secret never shows in either Stack's status, events
// or the controller's log.
func TestStackOutputsWiring(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	const token, rotated = "w1red-s3cret-t0ken", "r0tated-w1red-t0ken"
	f.commit = f.git.Commit(t, "infra", "main", map[string]string{
		"network/Pulumi.yaml": upstreamProgram,
		"app/Pulumi.yaml":     downstreamProgram,
	}, "network and app")
	createSecret(t, f.ns, "network-secrets", map[string]string{"token": token})
	f.start(t)
	logOnFailure(t, f)

	upstream := f.stack("network", func(s *v1alpha1.Stack) {
		s.Spec.Source.Dir = "network"
		s.Spec.Interval.Duration = dependencyInterval
		s.Spec.Config["cidr"] = apiextensionsv1.JSON{Raw: []byte(`"10.0.0.0/16"`)}
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "network-secrets"}}}
		s.Spec.Outputs = &v1alpha1.OutputsTarget{SecretName: "network-outputs"}
	})
	downstream := f.stack("app", func(s *v1alpha1.Stack) {
		s.Spec.Interval.Duration = dependencyInterval
		s.Spec.Outputs = nil
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{
			Name: "network",
			Keys: []v1alpha1.OutputKey{{Output: "cidr", As: "networkCidr"}, {Output: "network"}, {Output: "token"}},
		}}}
	})
	g.Expect(env.Client.Create(ctx, downstream)).To(Succeed())
	g.Expect(env.Client.Create(ctx, upstream)).To(Succeed())
	upKey, downKey := client.ObjectKeyFromObject(upstream), client.ObjectKeyFromObject(downstream)

	up := waitApplied(t, upKey, f.commit)
	down := waitApplied(t, downKey, f.commit)
	expectStartedAfter(t, down, up, f.commit)
	g.Expect(configMapData(g, f.ns, "wired-settings")).To(Equal(map[string]string{"cidr": "10.0.0.0/16", "firstSubnet": "10.0.0.0/16-a"}),
		"a renamed string, and an object that stayed an object")
	g.Expect(wiredToken(g, f.ns)).To(Equal(token))
	g.Expect(down.Status.Outputs).To(HaveKeyWithValue("token", v1alpha1.SecretOutputValue), "a secret output stays secret config downstream")
	g.Expect(down.Status.Outputs).To(HaveKeyWithValue("firstSubnet", `"10.0.0.0/16-a"`))
	var outputs corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "network-outputs"}, &outputs)).To(Succeed())
	g.Expect(outputs.Annotations).To(HaveKeyWithValue(v1alpha1.SecretOutputsAnnotation, "token"))
	g.Expect(outputs.Annotations).To(HaveKeyWithValue(v1alpha1.JSONOutputsAnnotation, "network"))

	// A plain output changes upstream: the downstream follows within seconds.
	patchStack(t, upKey, map[string]any{"spec": map[string]any{"config": map[string]any{"cidr": "10.1.0.0/16"}}})
	g.Eventually(func(g Gomega) {
		g.Expect(configMapData(g, f.ns, "wired-settings")).To(HaveKeyWithValue("cidr", "10.1.0.0/16"))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	expectFollowed(t, upKey, downKey)

	// Only a secret output changes: it shows in no status, only in the
	// outputs Secret, and still reaches the downstream.
	var sec corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "network-secrets"}, &sec)).To(Succeed())
	sec.Data["token"] = []byte(rotated)
	g.Expect(env.Client.Update(ctx, &sec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(wiredToken(g, f.ns)).To(Equal(rotated))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	expectFollowed(t, upKey, downKey)
	waitApplied(t, downKey, f.commit)

	assertNoSecrets(t, f, upKey, token, rotated, passphrase)
	assertNoSecrets(t, f, downKey, token, rotated, passphrase)
}

// wiredToken is the token the downstream program wrote into its Secret.
func wiredToken(g Gomega, ns string) string {
	var s corev1.Secret
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "wired-credentials"}, &s)).To(Succeed())
	return string(s.Data["token"])
}

// expectFollowed checks that the downstream's newest up started soon after
// the upstream's newest up ended, and logs the gap.
func expectFollowed(t *testing.T, upKey, downKey client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	var upRec, downRec v1alpha1.OperationRecord
	g.Eventually(func(g Gomega) {
		u, d := records(getStack(g, upKey), v1alpha1.OperationUp), records(getStack(g, downKey), v1alpha1.OperationUp)
		g.Expect(u).NotTo(BeEmpty())
		g.Expect(d).NotTo(BeEmpty())
		g.Expect(u[0].FinishedAt).NotTo(BeNil())
		g.Expect(d[0].FinishedAt).NotTo(BeNil())
		upRec, downRec = u[0], d[0]
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	gap := downRec.StartedAt.Sub(upRec.FinishedAt.Time)
	t.Logf("%s up ended %s -> %s up started %s: gap %s (interval %s)", upKey.Name, upRec.FinishedAt.Format(time.RFC3339Nano),
		downKey.Name, downRec.StartedAt.Format(time.RFC3339Nano), gap, dependencyInterval)
	g.Expect(upRec.Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(downRec.Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(gap).To(BeNumerically(">=", 0), "the downstream started before the upstream was applied")
	g.Expect(gap).To(BeNumerically("<", maxDependencyGap))
}
