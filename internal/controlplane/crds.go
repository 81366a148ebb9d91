package controlplane

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
	"k8s.io/client-go/rest"
)

// installCRDs creates every CRD found in dirs and waits until each is
// Established and its resources are in discovery, which is what clients use
// to map a kind to its resource.
func installCRDs(ctx context.Context, cfg *rest.Config, dirs []string, exited func() error) error {
	crds, err := readCRDs(dirs)
	if err != nil || len(crds) == 0 {
		return err
	}
	cs, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("controlplane: create CRD %s: %w", crd.Name, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	return poll(ctx, 60*time.Second, "the CRDs to be served", exited, func() (bool, error) {
		for _, crd := range crds {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !established(got) {
				return false, nil
			}
			for _, v := range got.Spec.Versions {
				if !v.Served {
					continue
				}
				list, err := dc.ServerResourcesForGroupVersion(got.Spec.Group + "/" + v.Name)
				if err != nil {
					return false, nil
				}
				if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == got.Spec.Names.Plural }) {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// readCRDs reads the CRD manifests of dirs, in file name order.
func readCRDs(dirs []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("controlplane: CRD directory: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() || !slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(e.Name())) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			found, err := readCRDFile(path)
			if err != nil {
				return nil, fmt.Errorf("controlplane: %s: %w", path, err)
			}
			crds = append(crds, found...)
		}
	}
	return crds, nil
}

func readCRDFile(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var crds []*apiextensionsv1.CustomResourceDefinition
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, err
		}
		var meta metav1.TypeMeta
		if err := utilyaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		if meta.Kind != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := utilyaml.Unmarshal(doc, crd); err != nil {
			return nil, err
		}
		crds = append(crds, crd)
	}
}
