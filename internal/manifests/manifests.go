// Package manifests holds Stackpilot's install manifests, config/default
// rendered by `make manifests` into stackpilot.yaml, embedded so that the
// stackpilot CLI installs exactly what the repository declares at the
// revision it was built from, without a checkout or kustomize at run time.
package manifests

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Rendered is `kubectl kustomize config/default`, byte for byte (the test
// compares them).
//
//go:embed stackpilot.yaml
var Rendered []byte

// The names config/default gives; the CLI's defaults name them too.
const (
	DefaultNamespace = "stackpilot-system"
	DeploymentName   = "stackpilot-controller"
	ServiceAccount   = "stackpilot-controller"
	ContainerName    = "manager"
	ClusterRoleName  = "stackpilot-manager-role"
	// StackEditorRoleName grants Stack writes; aggregated into edit and
	// admin where the Job executor is the default, bound by hand where Local
	// is (config/rbac/stack_editor_role.yaml, config/local).
	StackEditorRoleName = "stackpilot-stack-editor-role"
	// RunnerServiceAccount is the ServiceAccount, in each Stack's namespace,
	// that the installed controller's programs act as when a Stack names
	// none (--default-service-account).
	RunnerServiceAccount = "stackpilot-runner"
	// ExecutorFlag chooses the default executor in the manager's args.
	ExecutorFlag = "--default-executor"
	// ImageRepository is where releases publish the controller's image; a
	// CLI of version v installs ImageRepository:v.
	ImageRepository = "ghcr.io/stackpilot/stackpilot-controller"
)

// Options change the rendered manifests for one install.
type Options struct {
	// Namespace replaces stackpilot-system (empty: keep it).
	Namespace string
	// Image replaces the manager container's image (empty: keep it).
	Image string
	// Executor is the controller's default executor, Job or Local (empty:
	// keep config/default's, Job). Local is config/local: the manager's
	// --default-executor=Local, and Stack writes no longer aggregated into
	// the built-in edit and admin roles.
	Executor string
	// Shards are the names of the shards besides the main controller
	// (shards.go): each gets a controller Deployment of its own serving the
	// Stacks, Receivers and Alerts labelled sharding.fluxcd.io/key=<name>,
	// and the main controller serves what has no such label. Empty: one
	// controller serves everything.
	Shards []string
}

// aggregationLabels fold a ClusterRole into the built-in admin and edit roles.
var aggregationLabels = []string{"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit"}

// Objects are the manifests with opts applied, in the rendered order
// (kustomize's: Namespace, CRDs, RBAC, Service, Deployment).
func Objects(opts Options) ([]*unstructured.Unstructured, error) {
	objs, err := decode(Rendered)
	if err != nil {
		return nil, fmt.Errorf("embedded manifests: %w", err)
	}
	ns := opts.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	switch opts.Executor {
	case "", "Job":
	case "Local":
		if err := localExecutor(objs); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("executor %q: want Job or Local", opts.Executor)
	}
	// Sharded before the image and namespace are set: the shards' copies
	// get them as the main controller does.
	if objs, err = shard(objs, opts.Shards); err != nil {
		return nil, err
	}
	foundImage := false
	for _, o := range objs {
		if err := relocate(o, ns); err != nil {
			return nil, err
		}
		if opts.Image != "" && o.GetKind() == "Deployment" && isController(o) {
			if err := setImage(o, opts.Image); err != nil {
				return nil, err
			}
			foundImage = true
		}
	}
	if opts.Image != "" && !foundImage {
		return nil, errors.New("embedded manifests: no Deployment " + DeploymentName + " with a container " + ContainerName)
	}
	return objs, nil
}

// isController is true for the controller's Deployment and its shards'.
func isController(o *unstructured.Unstructured) bool {
	return o.GetName() == DeploymentName || o.GetLabels()[ShardPodLabel] != ""
}

// YAML is objs as one multi-document YAML stream, for --export.
func YAML(objs []*unstructured.Unstructured) ([]byte, error) {
	var b bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

func decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := r.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// relocate moves o from stackpilot-system to ns: the Namespace itself, the
// namespaced objects, and the ServiceAccount subjects of the bindings (the
// only cross-object references to the namespace; the Pod reads its own
// namespace from the downward API).
func relocate(o *unstructured.Unstructured, ns string) error {
	if ns == DefaultNamespace {
		return nil
	}
	if o.GetKind() == "Namespace" && o.GetName() == DefaultNamespace {
		o.SetName(ns)
		return nil
	}
	if o.GetNamespace() == DefaultNamespace {
		o.SetNamespace(ns)
	}
	if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
		return nil
	}
	subjects, _, err := unstructured.NestedSlice(o.Object, "subjects")
	if err != nil {
		return fmt.Errorf("%s %s: subjects: %w", o.GetKind(), o.GetName(), err)
	}
	for _, s := range subjects {
		if m, ok := s.(map[string]any); ok && m["kind"] == "ServiceAccount" && m["namespace"] == DefaultNamespace {
			m["namespace"] = ns
		}
	}
	return unstructured.SetNestedSlice(o.Object, subjects, "subjects")
}

// localExecutor makes objs config/local: the manager's default executor
// Local, and the Stack editor role no longer aggregated into edit and admin
// (with Local a program can act as the controller).
func localExecutor(objs []*unstructured.Unstructured) error {
	setArg, unlabelled := false, false
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == DeploymentName:
			containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if err != nil {
				return fmt.Errorf("the Deployment %s: containers: %w", o.GetName(), err)
			}
			for _, c := range containers {
				m, ok := c.(map[string]any)
				if !ok || m["name"] != ContainerName {
					continue
				}
				args, _ := m["args"].([]any)
				kept := []any{}
				for _, a := range args {
					if s, _ := a.(string); strings.HasPrefix(s, "--runner-endpoint=") || strings.HasPrefix(s, ExecutorFlag+"=") {
						continue
					}
					kept = append(kept, a)
				}
				m["args"] = slices.Insert(kept, indexAfter(kept, "--leader-elect"), any(ExecutorFlag+"=Local"))
				setArg = true
			}
			if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				return err
			}
		case o.GetKind() == "ClusterRole" && o.GetName() == StackEditorRoleName:
			labels := o.GetLabels()
			for _, l := range aggregationLabels {
				delete(labels, l)
			}
			o.SetLabels(labels)
			unlabelled = true
		}
	}
	if !setArg || !unlabelled {
		return errors.New("embedded manifests: no Deployment " + DeploymentName + " or no ClusterRole " + StackEditorRoleName)
	}
	return nil
}

// indexAfter is the index after the element want of args, or its end.
func indexAfter(args []any, want string) int {
	for i, a := range args {
		if a == want {
			return i + 1
		}
	}
	return len(args)
}

func setImage(o *unstructured.Unstructured, image string) error {
	containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return fmt.Errorf("the Deployment %s: containers: %w", o.GetName(), err)
	}
	set := false
	for _, c := range containers {
		if m, ok := c.(map[string]any); ok && m["name"] == ContainerName {
			m["image"] = image
			set = true
		}
	}
	if !set {
		return fmt.Errorf("the Deployment %s has no container %s", o.GetName(), ContainerName)
	}
	return unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
}
