package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// TestOCIDigestPinNeedsOwnCredentials (issue 21, item 1): namespace a pulls
// a private artifact by digest with its registry Secret. A Stack in
// namespace b pinned to the same digest, with no Secret or with other
// credentials, is refused with the registry's answer: the controller asks
// the registry for it (it never serves b the tree a's credentials pulled),
// nothing of the program runs for b, and no ConfigMap appears there.
func TestOCIDigestPinNeedsOwnCredentials(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const user, password, other = "tenant-a", "a-r3gistry-pa55", "b-0ther-pa55"
	f := newOCIFixture(t, testenv.WithRegistryBasicAuth(user, password))
	nsB := env.Namespace(t)
	createSecret(t, nsB, "pulumi-passphrase", map[string]string{"passphrase": passphrase})
	host := f.reg.Host()
	digest := strings.TrimSpace(stackpilot(t, "artifact", "push", f.url("team-a/private")+":v1",
		"--path", programDir(t, "private-settings", ""), "--insecure", "--creds", user+":"+password))
	createDockerConfigSecret(t, f.ns, "registry", host, user, password)
	createDockerConfigSecret(t, nsB, "registry", host, "tenant-b", other)
	// One controller for both tenants, as installed: one process, one cache.
	f.start(t, "--watch-namespace="+f.ns+","+nsB)

	pin := v1alpha1.OCIRef{Digest: digest}
	a := f.stack("tenant-a", "team-a/private", pin, func(s *v1alpha1.Stack) {
		s.Spec.Source.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "registry"}
	})
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(a), digest)
	g.Expect(configMapData(g, f.ns, "private-settings")).NotTo(BeEmpty())
	ups := f.ctrl.Operations(t, "")

	inB := func(name string, secret string) *v1alpha1.Stack {
		return f.stack(name, "team-a/private", pin, func(s *v1alpha1.Stack) {
			s.Namespace = nsB
			s.Spec.Config["namespace"] = apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", nsB))}
			if secret != "" {
				s.Spec.Source.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: secret}
			}
		})
	}
	for _, c := range []struct{ name, secret, answer string }{
		{"no-credentials", "", "requires credentials"},
		{"other-credentials", "registry", "rejected the credentials"},
	} {
		before := f.reg.Requests()
		b := inB(c.name, c.secret)
		g.Expect(env.Client.Create(ctx, b)).To(Succeed())
		s := waitNotReady(t, client.ObjectKeyFromObject(b), v1alpha1.AuthenticationFailedReason)
		msg := readyMessage(s)
		g.Expect(msg).To(ContainSubstring(host), c.name)
		g.Expect(msg).To(ContainSubstring(c.answer), "%s: the registry's answer", c.name)
		g.Expect(msg).NotTo(ContainSubstring(other))
		g.Expect(f.reg.Requests()).To(BeNumerically(">", before), "%s: the registry was asked, not the cache", c.name)
		g.Expect(s.Status.LastAppliedRevision).To(BeEmpty(), c.name)
		g.Expect(s.Status.History).To(BeEmpty(), "%s: no operation ran", c.name)
	}
	g.Expect(f.ctrl.Operations(t, "")).To(Equal(ups), "nothing ran for namespace b")
	var cm corev1.ConfigMap
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "private-settings"}, &cm)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the private program never ran in namespace b: %v", err)
}
