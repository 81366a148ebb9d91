package cluster

import (
	"context"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Annotations that WriteControllerLayout sets: the OCI image spec's ref name
// (the tag, which `skopeo copy oci:DIR:TAG` looks up) and version, and
// containerd's full image name (what `ctr image import` names it).
const (
	annotationRefName   = "org.opencontainers.image.ref.name"
	annotationVersion   = "org.opencontainers.image.version"
	annotationImageName = "io.containerd.image.name"
)

// WriteControllerLayout writes the controller image, the same one
// PushControllerImage gives the one-node cluster, as an OCI image layout in
// dir (emptied first), for a release: any registry accepts it (for example
// `skopeo copy oci:DIR:VERSION docker://REPOSITORY:VERSION`). Its name is
// repository:version, what `stackpilot install` of that version expects.
// The version goes into the manifest's annotations and the index entry's
// ref name, since the controller binary carries no version of its own.
func WriteControllerLayout(ctx context.Context, root string, toolDirs []string, cacheDir, dir, repository, version string) error {
	img, _, err := ControllerImage(ctx, root, toolDirs, cacheDir)
	if err != nil {
		return err
	}
	img = mutate.Annotations(img, map[string]string{annotationVersion: version}).(v1.Image)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("cluster: image layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationRefName:   version,
		annotationImageName: repository + ":" + version,
	})); err != nil {
		return fmt.Errorf("cluster: image layout %s: %w", dir, err)
	}
	return nil
}
