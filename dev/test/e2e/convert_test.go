package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// TestConvertPKOManifests converts PKO v2 manifests covering every field the
// converter carries over, applies the output to the real API server and
// runs it with the real controller: the Git Stack (basic auth, config from a
// ConfigMap, a Secret and literals, env from Secrets) and the Program Stack
// (its converted directory committed to a Git server) reach Ready; the Flux
// Stack, whose source is not served here, is accepted. Every field that
// cannot be carried over is one warning on stderr. Each program keeps the
// identity its PKO workspace had (issue 21, item 30a): the workspace
// template's ServiceAccount, else "default", never the controller's.
func TestConvertPKOManifests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	authed := testenv.NewGitServer(t, testenv.WithBasicAuth("pko-user", "pko-s3cret"))
	authed.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("")}, "first")
	g := NewWithT(t)

	tmpl, err := os.ReadFile("testdata/convert/pko.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	vars := map[string]string{
		"NS": f.ns, "AUTH_REPO": authed.URL("infra"), "GIT_USER": "pko-user", "GIT_PASSWORD": "pko-s3cret",
		"STATE": t.TempDir(), "PASSPHRASE": passphrase,
	}
	input := os.Expand(string(tmpl), func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return "${" + k + "}" // Pulumi YAML's own interpolations
	})
	in := filepath.Join(t.TempDir(), "pko.yaml")
	g.Expect(os.WriteFile(in, []byte(input), 0o644)).To(Succeed())

	programs := t.TempDir()
	stdout, stderr, code := mustPlanCLI(t, f.ns, "convert", "-f", in, "--program-dir", programs,
		"--program-url", f.git.URL("programs"), "--program-ref", "main")
	g.Expect(code).To(Equal(0), stderr)

	// One warning per dropped field, each saying why (a clause after the field).
	var warned []string
	warning := regexp.MustCompile(`^warning: Stack (\S+): (\S+): (.{20,})$`)
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if m := warning.FindStringSubmatch(line); m != nil {
			warned = append(warned, m[1]+" "+m[2])
		}
	}
	sort.Strings(warned)
	g.Expect(warned).To(Equal([]string{
		f.ns + "/conv-flux spec.configRef[settings].json",
		f.ns + "/conv-flux spec.environment",
		f.ns + "/conv-flux spec.prerequisites[0].requirement.succeededWithinDuration",
		f.ns + "/conv-flux spec.secretsProvider",
		f.ns + "/conv-flux spec.updateTemplate",
		f.ns + "/conv-git spec.backend", // file://: the controller's filesystem now
		f.ns + "/conv-git spec.workspaceTemplate",
		f.ns + "/conv-prog spec.backend",
	}), stderr)
	g.Expect(stderr).To(ContainSubstring("(its serviceAccountName carried over to spec.serviceAccountName)"))
	g.Expect(stderr).NotTo(ContainSubstring("pko-s3cret"))

	// The Program became a directory: commit it where the Stack looks.
	yml, err := os.ReadFile(filepath.Join(programs, "conv-page", "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	f.git.Commit(t, "programs", "main", map[string]string{"conv-page/Pulumi.yaml": string(yml)}, "converted")

	// The objects the Stacks read, then the converted manifests as they are.
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "conv-settings"},
		Data: map[string]string{"color": "green", "settings": `{"size": 3}`}})).To(Succeed())
	createSecret(t, f.ns, "conv-creds", map[string]string{"token": "t0ken"})
	createSecret(t, f.ns, "conv-env", map[string]string{"CONV_TOKEN": "env-t0ken"})
	// The programs' identities, as under PKO: may manage ConfigMaps here.
	for _, sa := range []string{"pko-runner", "default"} {
		createServiceAccount(t, f.ns, sa)
		grant(t, f.ns, sa, "configmaps")
	}
	applyManifests(t, f.ns, stdout)

	f.start(t)
	git := waitApplied(t, client.ObjectKey{Namespace: f.ns, Name: "conv-git"}, "")
	g.Expect(git.Spec.Source.Git.SecretRef.Name).To(Equal("conv-git-converted-git"))
	g.Expect(git.Spec.ServiceAccountName).To(Equal("pko-runner"), "the workspace template's ServiceAccount")
	g.Expect(git.Spec.Interval.Duration.String()).To(Equal("2m0s"))
	g.Expect(git.Spec.DestroyOnDelete).To(BeTrue())
	g.Expect(git.Spec.Refresh).To(BeTrue())
	g.Expect(git.Status.Outputs).To(HaveKeyWithValue("color", `"green"`))  // from the ConfigMap
	g.Expect(git.Status.Outputs).To(HaveKeyWithValue("token", "[secret]")) // from the Secret
	g.Expect(git.Spec.EnvFrom).To(ConsistOf(
		v1alpha1.EnvFromSource{SecretRef: &v1alpha1.OptionalObjectReference{Name: "conv-env"}},
		v1alpha1.EnvFromSource{SecretRef: &v1alpha1.OptionalObjectReference{Name: "conv-git-converted-env"}}))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "green"))

	prog := waitApplied(t, client.ObjectKey{Namespace: f.ns, Name: "conv-prog"}, "")
	g.Expect(prog.Spec.Source.Dir).To(Equal("conv-page"))
	g.Expect(prog.Spec.ServiceAccountName).To(Equal("default"), "PKO's default ServiceAccount")
	g.Expect(configMapData(g, f.ns, "conv-page")).To(HaveKeyWithValue("greeting", "bonjour"))

	flux := getStack(g, client.ObjectKey{Namespace: f.ns, Name: "conv-flux"})
	g.Expect(flux.Spec.Source.SourceRef).To(Equal(&v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "infra"}))
	g.Expect(flux.Spec.DependsOn).To(Equal([]v1alpha1.DependencyReference{{Name: "conv-git"}}))
	g.Expect(flux.Spec.Approval.Mode).To(Equal(v1alpha1.ApprovalPreviewOnly))
	g.Expect(flux.Spec.ServiceAccountName).To(Equal("deployer"))
	g.Expect(flux.Spec.Targets).To(HaveLen(1))
}

// applyManifests creates every object of a multi-document YAML in ns, as
// kubectl create -f would.
func applyManifests(t *testing.T, ns, manifests string) {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(manifests), 4096)
	for {
		var obj unstructured.Unstructured
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if obj.Object == nil {
			continue
		}
		if obj.GetNamespace() != ns {
			t.Fatalf("%s %s is in namespace %q, not %s", obj.GetKind(), obj.GetName(), obj.GetNamespace(), ns)
		}
		if err := env.Client.Create(context.Background(), &obj); err != nil {
			t.Fatalf("the API server refused %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}
