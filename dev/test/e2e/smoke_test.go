package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// smokeProgram creates one ConfigMap through the Kubernetes provider.
const smokeProgram = `name: smoke
runtime: yaml
config:
  namespace:
    type: string
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: smoke-settings
        namespace: ${namespace}
      data:
        color: blue
outputs:
  name: ${settings.metadata.name}
`

// TestSmokeChain proves the whole chain the product stands on: the pinned pulumi
// CLI driven through the Automation API runs a YAML program whose Kubernetes
// provider writes to the test API server, and a refresh preview sees drift.
func TestSmokeChain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := env.Namespace(t)

	work := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(work, "Pulumi.yaml"), []byte(smokeProgram), 0o644)).To(Succeed())
	state := t.TempDir()

	pulumi, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(env.BinDir), SkipVersionCheck: true})
	g.Expect(err).NotTo(HaveOccurred())
	vars := testenv.PulumiEnv(env.BinDir)
	vars["PULUMI_BACKEND_URL"] = "file://" + state
	vars["PULUMI_CONFIG_PASSPHRASE"] = "smoke-test-passphrase"
	vars["KUBECONFIG"] = env.Kubeconfig
	stack, err := auto.UpsertStackLocalSource(ctx, "dev", work,
		auto.Pulumi(pulumi),
		auto.PulumiHome(filepath.Join(state, "home")),
		auto.EnvVars(vars))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stack.SetAllConfig(ctx, auto.ConfigMap{
		"namespace":             {Value: ns},
		"kubernetes:kubeconfig": {Value: env.Kubeconfig},
	})).To(Succeed())

	up, err := stack.Up(ctx, optup.SuppressProgress())
	g.Expect(err).NotTo(HaveOccurred(), "pulumi up")
	g.Expect(up.Summary.Result).To(Equal("succeeded"))
	g.Expect(up.Outputs["name"].Value).To(Equal("smoke-settings"))

	// The ConfigMap exists in the API server, as the program declared it.
	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: ns, Name: "smoke-settings"}
	g.Expect(env.Client.Get(ctx, key, &cm)).To(Succeed(), "the program's ConfigMap is in the API server")
	g.Expect(cm.Data).To(HaveKeyWithValue("color", "blue"))

	// Drift: change the ConfigMap behind Pulumi's back.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"color":"red"}}`))
	g.Expect(env.Client.Patch(ctx, &cm, patch)).To(Succeed())

	// A refresh preview reports exactly that ConfigMap as changed.
	evts := make(chan events.EngineEvent)
	var changed []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range evts {
			// A refresh step's pre-event only says "refresh"; what it found
			// (same, update, delete) comes with its outputs event.
			if e.ResOutputsEvent == nil {
				continue
			}
			m := e.ResOutputsEvent.Metadata
			if m.Op != apitype.OpSame && m.Op != apitype.OpRead && m.Op != apitype.OpRefresh {
				changed = append(changed, fmt.Sprintf("%s %s", m.Op, m.URN))
			}
		}
	}()
	_, err = stack.PreviewRefresh(ctx, optrefresh.EventStreams(evts))
	<-done
	g.Expect(err).NotTo(HaveOccurred(), "refresh preview")
	g.Expect(changed).To(ConsistOf(
		fmt.Sprintf("%s urn:pulumi:dev::smoke::kubernetes:core/v1:ConfigMap::settings", apitype.OpUpdate)),
		"the refresh preview reports only the patched ConfigMap")
}
