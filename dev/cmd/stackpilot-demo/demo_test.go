package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// TestDemoOnce runs `stackpilot-demo --mode process --once` end to end:
// control plane, controller process, Git server, the sample Stack with the real
// Pulumi engine and Kubernetes provider. runDemo itself fails unless the Stack
// became Ready at the committed revision, the program's ConfigMap holds the
// expected data and the outputs were published, so the test checks what it
// printed.
func TestDemoOnce(t *testing.T) {
	out := runDemoOnce(t, demoOptions{
		mode: modeProcess,
		// Not bin/stackpilot-controller: a `make demo` may be running it.
		controllerBin: filepath.Join(t.TempDir(), "stackpilot-controller"),
	})
	for _, want := range []string{
		"Ready=True (Succeeded)",
		"kubectl get stacks -A",
		"cluster-metadata   True", // the kubectl table
		"registryToken      [secret]",
		"Done in",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}

// TestDemoOnceInCluster runs `stackpilot-demo --mode cluster --once`, what
// `make demo` does on a machine that can run the one-node cluster: the
// controller is installed from config/ and runs as a Pod, and kubectl shows it.
func TestDemoOnceInCluster(t *testing.T) {
	testenv.RequireCluster(t)
	out := runDemoOnce(t, demoOptions{mode: modeCluster})
	for _, want := range []string{
		"Starting a one-node cluster",
		"Installing Stackpilot from config/cluster",
		"Ready=True (Succeeded)",
		"kubectl get pods,stacks -A",
		"stackpilot-system   pod/stackpilot-controller-", // the controller's Pod, in the kubectl table
		"Running",
		"stack.stackpilot.dev/cluster-metadata   True",
		"registryToken      [secret]",
		"stop the cluster and remove /var/tmp/spc-demo-",
		"Done in",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	if dirs, _ := filepath.Glob("/var/tmp/spc-demo-*"); len(dirs) > 0 {
		t.Errorf("the demo left %v behind", dirs)
	}
}

func runDemoOnce(t *testing.T, opts demoOptions) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping the end-to-end demo in -short mode")
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.RequireBinaries(bin, demoTools...); err != nil {
		t.Skipf("skipping the end-to-end demo: %v", err)
	}
	opts.once = true
	opts.timeout = 5 * time.Minute
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	err = runDemo(ctx, opts, &out, &out)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("stackpilot-demo --once: %v", err)
	}
	return out.String()
}

// TestDemoManifests checks the embedded sample without a cluster.
func TestDemoManifests(t *testing.T) {
	const url = "http://127.0.0.1:1/platform.git"
	objs, err := decodeManifests(demoManifestsFor(url))
	if err != nil {
		t.Fatal(err)
	}
	var stack *v1alpha1.Stack
	secrets := map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *v1alpha1.Stack:
			stack = o
		case *corev1.Secret:
			secrets[o.Name] = true
		}
	}
	if stack == nil || len(secrets) != 2 || len(objs) != 4 {
		t.Fatalf("want a Namespace, two Secrets and a Stack, got %d objects", len(objs))
	}
	if stack.Namespace != demoNamespace || stack.Name != demoStackName {
		t.Errorf("Stack is %s/%s", stack.Namespace, stack.Name)
	}
	if got := stack.Spec.Source.Git.URL; got != url {
		t.Errorf("git URL %q, want %q", got, url)
	}
	if stack.Spec.Source.Dir != demoProgramDir {
		t.Errorf("dir %q, want %q", stack.Spec.Source.Dir, demoProgramDir)
	}
	if !secrets[stack.Spec.SecretsProvider.PassphraseSecretRef.Name] || !secrets[stack.Spec.ConfigFrom[0].SecretRef.Name] {
		t.Errorf("the Stack refers to Secrets the sample does not create: %v", secrets)
	}
	if o := stack.Spec.Outputs; o == nil || o.SecretName == "" || o.ConfigMapName == "" {
		t.Errorf("outputs: %+v, want a Secret and a ConfigMap", o)
	}
	if string(stack.Spec.Config["kubernetes:enableConfigMapMutable"].Raw) != "true" {
		t.Errorf("config lacks kubernetes:enableConfigMapMutable: true")
	}
	if !bytes.Contains(demoProgram, []byte("deleteBeforeReplace: true")) {
		t.Errorf("the program's ConfigMap has a fixed name but no deleteBeforeReplace")
	}
}

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-h"}, 0, "--once"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"--mode", "vm"}, 2, `--mode "vm": want auto, cluster or process`},
		{[]string{"--nope"}, 2, "unknown flag: --nope"},
	} {
		var out bytes.Buffer
		if code := run(tc.args, &out, &out); code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("stackpilot-demo %q: exit %d, output %q; want exit %d and %q", tc.args, code, out.String(), tc.code, tc.out)
		}
	}
}
