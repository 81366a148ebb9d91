package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/manifests"
)

// The shared pieces of check, install, uninstall and version: where the
// controller is installed and what state its Deployment is in.

// adminFieldManager owns what install applies (every CLI write uses "stackpilot").
const adminFieldManager = "stackpilot"

// releaseVersion is a released CLI's version (v1.2.3, v1.2.3-rc.1): only
// those have an image of the same tag.
var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// pseudoVersionTail ends a Go pseudo-version (v0.0.0-20261202100548-d440d69abcde,
// v1.2.4-0.20261202100548-d440d69abcde): a commit's UTC time and its
// 12-digit hash, which `go install ...@<branch>` and builds in a Git checkout
// stamp as the module version. It looks like a release's pre-release, but no
// image is ever published with such a tag.
var pseudoVersionTail = regexp.MustCompile(`[-.][0-9]{14}-[0-9a-f]{12}$`)

// defaultImage is the controller image this CLI was built for, or an error
// saying to pass --image when it is a development build (its version is no
// image tag that was ever published).
func defaultImage(v string) (string, error) {
	if !releaseVersion.MatchString(v) || pseudoVersionTail.MatchString(v) {
		return "", fmt.Errorf("this stackpilot is a development build (version %s) with no controller image of its own: pass --image REF (for example --image %s:v0.3.0)", v, manifests.ImageRepository)
	}
	return manifests.ImageRepository + ":" + v, nil
}

// installNamespace is -n for install and uninstall: the namespace Stackpilot
// goes into, stackpilot-system unless given (never the context's namespace,
// which is where a user works, not where the controller lives).
func (c *cli) installNamespace() string {
	if c.kube.namespace != "" {
		return c.kube.namespace
	}
	return manifests.DefaultNamespace
}

// deploymentState says whether the controller's Deployment has rolled out,
// and if not, how far it is.
func deploymentState(d *appsv1.Deployment) (ready bool, detail string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return false, "the Deployment controller has not seen its latest spec yet"
	case s.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated", s.UpdatedReplicas, want)
	case s.AvailableReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas available", s.AvailableReplicas, want)
	}
	return true, fmt.Sprintf("%d/%d ready", s.AvailableReplicas, want)
}

// controllerImage is the manager container's image in d.
func controllerImage(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == manifests.ContainerName {
			return c.Image
		}
	}
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

// imageVersion is the tag (or digest) of an image reference: the
// controller's version as far as the cluster can say.
func imageVersion(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return "latest"
}

// waitDeployment polls the controller's Deployment until it has rolled out,
// ctx ends (the error says how far it got), or it is gone. Once the
// Deployment was read, a failed read does not replace what it said; and a
// read refused because the deadline is near says nothing at all: the
// client's rate limiter refuses to wait past it ("would exceed context
// deadline") before ctx ends.
func waitDeployment(ctx context.Context, cl client.Client, key client.ObjectKey) error {
	detail, seen := "it could not be read in time", false
	for {
		var d appsv1.Deployment
		err := cl.Get(ctx, key, &d)
		switch {
		case err == nil:
			var ready bool
			seen = true
			if ready, detail = deploymentState(&d); ready {
				return nil
			}
		case !seen && ctx.Err() == nil && !deadlineNear(err):
			detail = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the controller (Deployment %s) is not ready: %s; see `kubectl -n %s describe deployment %s` and `kubectl -n %s logs deployment/%s`",
				key, detail, key.Namespace, key.Name, key.Namespace, key.Name)
		case <-time.After(time.Second):
		}
	}
}

// deadlineNear: err is a read refused because the context's deadline is
// near or past. client-go's rate limiter (golang.org/x/time/rate) says so
// in words only, wrapping no context error.
func deadlineNear(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.Contains(err.Error(), "would exceed context deadline")
}

// manifestName names an object for progress lines: "Deployment stackpilot-system/stackpilot-controller".
func manifestName(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}
