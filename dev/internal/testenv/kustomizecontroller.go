package testenv

import "context"

// KustomizeController is Flux's kustomize-controller (bin/kustomize-controller, the version
// pinned by KUSTOMIZE_CONTROLLER_VERSION) running as a child process against an Env, so tests
// can check that a Flux Kustomization applying Stack manifests waits on them the way Flux
// users expect. It fetches artifacts from a SourceController's storage over HTTP, through the
// artifact URL source-controller advertises.
type KustomizeController struct {
	*fluxProcess
}

// StartKustomizeController installs the Kustomization CRD in e (see InstallKustomizeCRDs),
// starts bin/kustomize-controller watching every namespace, waits until it is ready and stops
// it when t ends. e must have been started with Options.FluxCRDs (it reads the source kinds).
// args are extra flags.
func (e *Env) StartKustomizeController(t TB, args ...string) *KustomizeController {
	t.Helper()
	return e.StartKustomizeControllerIn(t, "", args...)
}

// StartKustomizeControllerIn is StartKustomizeController watching namespace alone (every
// namespace when ""): its Kustomizations and the sources they name must be there.
func (e *Env) StartKustomizeControllerIn(t TB, namespace string, args ...string) *KustomizeController {
	t.Helper()
	if err := e.InstallKustomizeCRDs(context.Background()); err != nil {
		t.Fatalf("%v", err)
	}
	dir := t.TempDir()
	k := &KustomizeController{fluxProcess: newFluxProcess(t, "kustomize-controller", dir)}
	// Tests run one Kustomization at a time; a failed fetch should surface fast.
	k.start(t, e, dir, namespace, nil, append([]string{"--http-retry=2"}, args...))
	return k
}
