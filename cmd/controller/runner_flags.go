package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The flags of the Job executor: where operations run by default, which image
// runs them and how runner Pods reach the controller.

const (
	// defaultMaxConcurrentJobs bounds the runner Pods one controller keeps at
	// once. A Job's work runs on the cluster's nodes, not in the controller,
	// so the bound is the cluster's capacity and the API server's load, not
	// the controller's CPUs (unlike --concurrent-operations).
	defaultMaxConcurrentJobs = 20
	// runnerServiceName and runnerPort are the Service of config/manager in
	// front of the controller's runner endpoint.
	runnerServiceName = "stackpilot-runner"
	runnerPort        = 9444
	// ownImageTimeout bounds the read of the controller's own Pod at start.
	ownImageTimeout = 30 * time.Second
)

// checkExecutor refuses a --default-executor that is neither Local nor Job
// (the names spec.runner.executor takes, case and all).
func checkExecutor(name string) error {
	switch name {
	case v1alpha1.ExecutorLocal, v1alpha1.ExecutorJob:
		return nil
	}
	return fmt.Errorf("--default-executor=%q: want %s (operations run as processes of the controller) or %s (one Pod per operation in the Stack's namespace)",
		name, v1alpha1.ExecutorLocal, v1alpha1.ExecutorJob)
}

// defaultRunnerEndpoint is the URL runner Pods reach the controller at when
// --runner-endpoint is not set: the stackpilot-runner Service of the
// controller's namespace.
func defaultRunnerEndpoint(namespace string) string {
	return fmt.Sprintf("https://%s.%s.svc:%d", runnerServiceName, namespace, runnerPort)
}

// checkRunnerEndpoint refuses what a runner Pod could not use: the URL must
// be absolute HTTPS (the channel carries the program and secret inputs).
func checkRunnerEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return fmt.Errorf("--runner-endpoint=%q: want an https URL that runner Pods reach the controller at, such as %s", endpoint, defaultRunnerEndpoint("stackpilot-system"))
	}
	return nil
}

// ownImage is the image of the controller's own container, read from its Pod
// (POD_NAMESPACE/POD_NAME, set from the downward API): the default of
// --runner-image, so that runner Pods run exactly the binary of the
// controller that starts them.
//
// Why the API and not an environment variable the manifests set to the same
// string: an image is changed in one place (kustomize's images:, `stackpilot
// install --image`, `kubectl set image`, a Helm value), and only the
// container's image field follows; a copy in an env var would silently keep
// the old one and start runners of another version than the controller. And
// the Pod's status says which image the node really pulled (its digest), so a
// tag that moves later (latest, v1) does not change what runners run.
//
// The container is the one named container (the installed manifests' name),
// else the only one.
func ownImage(ctx context.Context, c client.Reader, namespace, name, container string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ownImageTimeout)
	defer cancel()
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pod); err != nil {
		return "", fmt.Errorf("read the controller's own Pod %s/%s for its image (the default of --runner-image; pass the flag, or grant get on pods): %w", namespace, name, err)
	}
	image, found := "", ""
	for _, c := range pod.Spec.Containers {
		if c.Name == container || len(pod.Spec.Containers) == 1 {
			image, found = c.Image, c.Name
		}
	}
	if image == "" {
		return "", fmt.Errorf("the controller's Pod %s/%s has no container %q: pass --runner-image", namespace, name, container)
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name != found {
			continue
		}
		if pinned := pinnedImage(image, s.ImageID); pinned != "" {
			return pinned, nil
		}
	}
	return image, nil
}

// pinnedImage is image pinned to the digest the node reports in imageID
// ("registry/repo@sha256:..."), or "" when imageID names no pullable digest
// (an image loaded into the node, "sha256:..." alone) or another repository.
func pinnedImage(image, imageID string) string {
	imageID = strings.TrimPrefix(imageID, "docker-pullable://")
	repo, digest, ok := strings.Cut(imageID, "@")
	if !ok || !strings.HasPrefix(digest, "sha256:") {
		return ""
	}
	if strings.Contains(image, "@") {
		return image // already pinned
	}
	name := image
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	// The node normalises names (docker.io/library/...); use its repository
	// only when it is the image's, so a mirror's name never replaces the
	// user's.
	if repo != name && !strings.HasSuffix(repo, "/"+name) {
		return ""
	}
	return name + "@" + digest
}

// runnerImage is --runner-image, else the controller's own image when it
// runs in a Pod. Outside a Pod there is none; a controller whose default
// executor is Job cannot start without one.
func runnerImage(ctx context.Context, c client.Reader, flagValue, defaultExecutor string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if ns == "" || name == "" {
		if defaultExecutor == v1alpha1.ExecutorJob {
			return "", errors.New("--default-executor=Job needs --runner-image: the controller does not run in a Pod (POD_NAMESPACE and POD_NAME unset), so it has no image of its own to default to")
		}
		return "", nil // Job Stacks are refused an image later, by the executor
	}
	return ownImage(ctx, c, ns, name, controllerContainer)
}

// controllerContainer is the controller's container in the installed
// Deployment (config/manager/manager.yaml).
const controllerContainer = "manager"
