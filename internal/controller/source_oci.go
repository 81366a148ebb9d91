package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	srcoci "github.com/stackpilot/stackpilot/internal/source/oci"
)

// OCISource resolves OCI references, shared by every Stack that follows the
// same (repository, ref, credentials), and fetches each artifact once, after
// verifying it, into the content-addressed artifact cache.
type OCISource struct {
	Resolver *srcoci.Resolver
	Fetcher  *srcoci.Fetcher
}

// NewOCISource returns an OCISource whose artifacts' chosen layer, and the
// files extracted from it, are each at most maxSize bytes (0: the default).
func NewOCISource(maxSize int64) *OCISource {
	f := srcoci.NewFetcher()
	if maxSize > 0 {
		f.MaxSize = maxSize
	}
	return &OCISource{Resolver: srcoci.NewResolver(), Fetcher: f}
}

// ociTarget is what a Stack's spec.source.oci resolves to before the tag:
// the repository, how to reach it and what to trust.
type ociTarget struct {
	repository string
	client     *ocilib.Client
	verifier   srcoci.Verifier // nil: no verification asked
	layerType  string
}

// resolveOCI resolves spec.source.oci's ref with a shared lookup.
func (r *StackReconciler) resolveOCI(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	target, err := r.ociTarget(ctx, stack)
	if err != nil {
		return err
	}
	var opts []srcoci.ResolveOption
	if isRequested(stack) {
		opts = append(opts, srcoci.Force())
	}
	rev, err := r.OCI.Resolver.Resolve(ctx, target.repository, ociRef(stack.Spec.Source.OCI.Ref), target.client, r.sourceMaxAge(stack), opts...)
	if err != nil {
		return sourceError(err, v1alpha1.OCIOperationFailedReason)
	}
	st.revision = rev.String()
	st.fetch = func(ctx context.Context) (artifact.Artifact, error) {
		return r.ociFetch(ctx, target, rev)
	}
	return nil
}

func (r *StackReconciler) ociFetch(ctx context.Context, target *ociTarget, rev srcoci.Revision) (artifact.Artifact, error) {
	art, err := r.OCI.Fetcher.Fetch(ctx, target.repository, rev, target.client,
		srcoci.FetchOptions{LayerMediaType: target.layerType, Verifier: target.verifier}, r.Artifacts)
	if err != nil {
		return artifact.Artifact{}, ociFetchError(err, rev.String())
	}
	return art, nil
}

// ociFetchRevision fetches a revision recorded in status again (for destroy
// when the cache lost it), verified like any other.
func (r *StackReconciler) ociFetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string) (artifact.Artifact, error) {
	rev, err := srcoci.ParseRevision(revision)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and cannot be fetched: %w", revision, err)
	}
	target, err := r.ociTarget(ctx, stack)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and the registry settings are unusable: %w", revision, err)
	}
	art, err := r.ociFetch(ctx, target, rev)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is neither cached nor fetchable: %w", revision, err)
	}
	return art, nil
}

// ociFetchError keeps what is wrong with the artifact itself for the
// revision alone (a new push can fix it, retrying cannot) and retries the
// rest.
func ociFetchError(err error, revision string) error {
	var verr *srcoci.VerificationError
	var limit *ocilib.LimitError
	var digest *ocilib.DigestError
	var unsafe *artifact.UnsafePathError
	var limits *artifact.LimitError
	switch {
	case errors.As(err, &verr):
		return transient(v1alpha1.VerificationFailedReason, fmt.Errorf("%w; nothing of it was applied", err))
	case errors.As(err, &limit), errors.As(err, &limits):
		return stallingAt(revision, v1alpha1.ArtifactFailedReason, "%v (controller flag %s; checked again every spec.interval)", err, limitFlag(err))
	case errors.As(err, &unsafe):
		return stallingAt(revision, v1alpha1.ArtifactFailedReason, "%v: push an artifact without it (checked again every spec.interval)", err)
	case errors.As(err, &digest):
		return transient(v1alpha1.ArtifactFailedReason, err)
	}
	return sourceError(err, v1alpha1.OCIOperationFailedReason)
}

// ociTarget reads spec.source.oci and the Secrets it names.
func (r *StackReconciler) ociTarget(ctx context.Context, stack *v1alpha1.Stack) (*ociTarget, error) {
	o := stack.Spec.Source.OCI
	repo, err := ocilib.ParseURL(o.URL)
	if err != nil {
		return nil, stalling(v1alpha1.InvalidSpecReason, "spec.source.oci.url: %v", err)
	}
	t := &ociTarget{repository: repo, client: &ocilib.Client{Insecure: o.Insecure, UserAgent: "stackpilot-controller"}}
	if o.LayerSelector != nil {
		t.layerType = o.LayerSelector.MediaType
	}
	if o.SecretRef != nil {
		creds, err := r.ociCredentials(ctx, stack.Namespace, o.SecretRef.Name, repo)
		if err != nil {
			return nil, err
		}
		t.client.Credentials = creds
	}
	if o.Verify != nil {
		v, err := r.ociVerifier(ctx, stack.Namespace, o.Verify)
		if err != nil {
			return nil, err
		}
		t.verifier = v
	}
	return t, nil
}

// ociCredentials reads a kubernetes.io/dockerconfigjson Secret, as an image
// pull would, and picks the entry for the repository's registry.
func (r *StackReconciler) ociCredentials(ctx context.Context, namespace, name, repository string) (*ocilib.Credentials, error) {
	sec, err := r.secretFor(ctx, namespace, name, "spec.source.oci.secretRef", v1alpha1.AuthenticationFailedReason)
	if err != nil {
		return nil, err
	}
	data, ok := sec.Data[corev1.DockerConfigJsonKey]
	if !ok {
		data, ok = sec.Data[corev1.DockerConfigKey]
	}
	if !ok {
		return nil, stalling(v1alpha1.AuthenticationFailedReason,
			"spec.source.oci.secretRef: Secret %s has no %s key: create it with `kubectl create secret docker-registry %s --docker-server=HOST --docker-username=... --docker-password=...`",
			name, corev1.DockerConfigJsonKey, name)
	}
	host, _, _ := strings.Cut(repository, "/")
	creds, err := ocilib.CredentialsFromDockerConfigJSON(data, host)
	if err != nil {
		return nil, stalling(v1alpha1.AuthenticationFailedReason, "spec.source.oci.secretRef (Secret %s): %v", name, err)
	}
	if creds == nil {
		return nil, stalling(v1alpha1.AuthenticationFailedReason,
			"spec.source.oci.secretRef: Secret %s holds no credentials for registry %s: add an entry for it under \"auths\"", name, host)
	}
	return creds, nil
}

// ociVerifier reads the public keys of spec.source.oci.verify: every data
// key of the Secret ending in ".pub", as Flux does.
func (r *StackReconciler) ociVerifier(ctx context.Context, namespace string, v *v1alpha1.OCIVerification) (srcoci.Verifier, error) {
	if v.Provider != "" && v.Provider != "cosign" {
		return nil, stalling(v1alpha1.InvalidSpecReason, "spec.source.oci.verify.provider %q is not supported: use cosign", v.Provider)
	}
	name := v.SecretRef.Name
	sec, err := r.secretFor(ctx, namespace, name, "spec.source.oci.verify.secretRef", v1alpha1.VerificationFailedReason)
	if err != nil {
		return nil, err
	}
	keys := map[string][]byte{}
	for k, pem := range sec.Data {
		if strings.HasSuffix(k, ".pub") {
			keys[k] = pem
		}
	}
	if len(keys) == 0 {
		var have []string
		for k := range sec.Data {
			have = append(have, k)
		}
		sort.Strings(have)
		return nil, stalling(v1alpha1.VerificationFailedReason,
			"spec.source.oci.verify.secretRef: Secret %s has no key ending in .pub (it has %v): add the cosign public key as, for example, cosign.pub", name, have)
	}
	verifier, err := srcoci.NewCosignVerifier(keys)
	if err != nil {
		return nil, stalling(v1alpha1.VerificationFailedReason, "spec.source.oci.verify.secretRef (Secret %s): %v", name, err)
	}
	return verifier, nil
}

// secretFor reads a Secret a source field names; field is for messages,
// reason for the conditions when it cannot be read.
func (r *StackReconciler) secretFor(ctx context.Context, namespace, name, field, reason string) (*corev1.Secret, error) {
	var sec corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, waiting(reason, "%s: Secret %s not found", field, name)
	}
	if err != nil {
		return nil, transient(reason, fmt.Errorf("read Secret %s: %w", name, err))
	}
	return &sec, nil
}

func ociRef(ref *v1alpha1.OCIRef) srcoci.Ref {
	if ref == nil {
		return srcoci.Ref{}
	}
	return srcoci.Ref{Tag: ref.Tag, SemVer: ref.SemVer, Digest: ref.Digest}
}
