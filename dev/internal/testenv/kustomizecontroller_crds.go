package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
)

// KustomizeCRDDir is where `make tools` (dev/hack/kustomize-crds.sh) copies kustomize-controller's
// CRDs, under BinDir. It is apart from bin/crds/flux so that Options.FluxCRDs keeps
// installing source-controller's kinds alone.
const KustomizeCRDDir = "crds/kustomize"

// InstallKustomizeCRDs installs the CRDs of KustomizeCRDDir (kustomizations.kustomize.toolkit.fluxcd.io)
// in e and waits until they are served. It is idempotent: the tests that share one Env each
// call it, and a CRD already there is left as it is.
func (e *Env) InstallKustomizeCRDs(ctx context.Context) error {
	dir := filepath.Join(e.BinDir, KustomizeCRDDir)
	crds, err := readKustomizeCRDs(dir)
	if err != nil {
		return fmt.Errorf("kustomize CRDs: %w (run `make tools` to copy them from the pinned kustomize-controller)", err)
	}
	if len(crds) == 0 {
		return fmt.Errorf("kustomize CRDs: no CRD in %s (run `make tools`)", dir)
	}
	cs, err := apiextensions.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kustomize CRDs: create %s: %w", crd.Name, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return err
	}
	// Served means Established and in discovery: clients map kinds to resources from there.
	served := func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil || !slices.ContainsFunc(got.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		}) {
			return false
		}
		for _, v := range got.Spec.Versions {
			if !v.Served {
				continue
			}
			list, err := dc.ServerResourcesForGroupVersion(got.Spec.Group + "/" + v.Name)
			if err != nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == got.Spec.Names.Plural }) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Minute)
	for _, crd := range crds {
		for !served(crd) {
			if time.Now().After(deadline) {
				return fmt.Errorf("kustomize CRDs: %s not served within 1m", crd.Name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// readKustomizeCRDs reads the CustomResourceDefinitions of the YAML files of dir.
func readKustomizeCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			var meta metav1.TypeMeta
			if err := utilyaml.Unmarshal(doc, &meta); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if meta.Kind != "CustomResourceDefinition" {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := utilyaml.Unmarshal(doc, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}
