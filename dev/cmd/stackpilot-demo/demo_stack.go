package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// demoManifestsFor is the embedded demo/stack.yaml with the Git URL filled in.
func demoManifestsFor(gitURL string) string {
	return strings.ReplaceAll(demoManifests, "${GIT_URL}", gitURL)
}

// decodeManifests reads a multi-document YAML stream into typed objects.
func decodeManifests(manifests string) ([]client.Object, error) {
	decoder := serializer.NewCodecFactory(demoScheme()).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	var objs []client.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode manifest: %w", err)
		}
		cobj, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("manifest of %T is not an object", obj)
		}
		objs = append(objs, cobj)
	}
}

// applyManifests creates the objects (the control plane is new, so nothing
// exists yet).
func applyManifests(ctx context.Context, c client.Client, manifests string) error {
	objs, err := decodeManifests(manifests)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(obj), err)
		}
	}
	return nil
}

// isApplied says whether stack is Ready at commit for its current generation.
func isApplied(s *v1alpha1.Stack, commit string) bool {
	return conditions.IsReady(s) &&
		s.Status.ObservedGeneration == s.Generation &&
		strings.HasSuffix(s.Status.LastAppliedRevision, commit)
}

// maxDemoFailures is how many failed attempts the demo lets the controller
// make (it retries every 10s) before giving up.
const maxDemoFailures = 3

// waitReady polls the Stack until it is Ready at commit, printing each change
// of its Ready condition and of the running operation.
func (d *demo) waitReady(ctx context.Context, key client.ObjectKey, commit string) (*v1alpha1.Stack, error) {
	deadline := time.After(d.opts.timeout)
	last := ""
	for {
		s := &v1alpha1.Stack{}
		if err := d.client.Get(ctx, key, s); err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("get Stack %s: %w", key, err)
		}
		if line := progressLine(s); line != last {
			d.logf("  %s", line)
			last = line
		}
		if isApplied(s, commit) {
			return s, nil
		}
		if conditions.IsStalled(s) {
			return s, fmt.Errorf("the Stack is Stalled: %s", conditionMessage(s, v1alpha1.StalledCondition))
		}
		if s.Status.Failures >= maxDemoFailures {
			return s, fmt.Errorf("the Stack failed %d times; last: %s", s.Status.Failures, conditionMessage(s, v1alpha1.ReadyCondition))
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-d.ctrl.Exited():
			return s, fmt.Errorf("the controller exited; its log: %s", d.ctrl.LogLocation())
		case <-deadline:
			return s, fmt.Errorf("the Stack was not Ready within %s; Ready: %s", d.opts.timeout, conditionMessage(s, v1alpha1.ReadyCondition))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// progressLine summarises where the Stack is: its Ready condition and the
// operation that runs, if any.
func progressLine(s *v1alpha1.Stack) string {
	line := "Ready=" + conditionMessage(s, v1alpha1.ReadyCondition)
	if op := s.Status.CurrentOperation; op != nil {
		line += fmt.Sprintf(" | running %s %s", op.Type, op.ID)
	}
	return line
}

func conditionMessage(s *v1alpha1.Stack, typ string) string {
	c := conditions.Get(s, typ)
	if c == nil {
		return "<not set yet>"
	}
	return fmt.Sprintf("%s (%s) %s", c.Status, c.Reason, c.Message)
}

// verifyDemo checks what the sample should have produced: the ConfigMap the
// program writes, and the outputs published by the controller.
func verifyDemo(ctx context.Context, c client.Client, s *v1alpha1.Stack, commit string) error {
	var problems []string
	check := func(what string, got map[string]string, want map[string]string, absent ...string) {
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				problems = append(problems, fmt.Sprintf("%s: %s = %q, want %q", what, k, g, v))
			}
		}
		for _, k := range absent {
			if _, ok := got[k]; ok {
				problems = append(problems, fmt.Sprintf("%s: has %s, which should not be there", what, k))
			}
		}
	}

	if !isApplied(s, commit) {
		problems = append(problems, fmt.Sprintf("Stack: not Ready at %s: lastAppliedRevision %q, Ready %s", commit, s.Status.LastAppliedRevision, conditionMessage(s, v1alpha1.ReadyCondition)))
	}
	check("Stack status.outputs", s.Status.Outputs, map[string]string{
		"clusterName":       `"stackpilot-demo"`,
		"metadataConfigMap": `"demo/cluster-metadata"`,
		"registryToken":     v1alpha1.SecretOutputValue,
	})

	var meta corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: "cluster-metadata"}, &meta); err != nil {
		problems = append(problems, fmt.Sprintf("ConfigMap demo/cluster-metadata (written by the program): %v", err))
	} else {
		check("ConfigMap demo/cluster-metadata", meta.Data, map[string]string{
			"cluster_name":   "stackpilot-demo",
			"environment":    "dev",
			"region":         "eu-west-1",
			"pulumi_project": "cluster-metadata",
			"pulumi_stack":   "dev",
		})
	}

	outputs := map[string]string{
		"clusterName":       "stackpilot-demo",
		"environment":       "dev",
		"region":            "eu-west-1",
		"metadataConfigMap": "demo/cluster-metadata",
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: s.Spec.Outputs.ConfigMapName}, &cm); err != nil {
		problems = append(problems, fmt.Sprintf("outputs ConfigMap: %v", err))
	} else {
		check("outputs ConfigMap", cm.Data, outputs, "registryToken")
		if !ownedBy(cm.OwnerReferences, s) {
			problems = append(problems, "outputs ConfigMap: not owned by the Stack")
		}
	}
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: s.Spec.Outputs.SecretName}, &sec); err != nil {
		problems = append(problems, fmt.Sprintf("outputs Secret: %v", err))
	} else {
		data := map[string]string{}
		for k, v := range sec.Data {
			data[k] = string(v)
		}
		outputs["registryToken"] = "demo-token-not-a-real-secret"
		check("outputs Secret", data, outputs)
	}

	if len(problems) > 0 {
		sort.Strings(problems)
		return errors.New("\n  " + strings.Join(problems, "\n  "))
	}
	return nil
}

func ownedBy(refs []metav1.OwnerReference, s *v1alpha1.Stack) bool {
	for _, r := range refs {
		if r.UID == s.UID && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}
