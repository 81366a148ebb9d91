package oci

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/serror"
	"github.com/stackpilot/stackpilot/internal/source"
)

// Kind is spec.source.oci: it resolves OCI references, shared by every
// Stack that follows the same (repository, ref, credentials), and fetches
// each artifact once, after verifying it, into the content-addressed
// artifact cache.
type Kind struct {
	// Reader reads the Secrets the spec names (the API server, not a cache).
	Reader   client.Reader
	Resolver *Resolver
	Fetcher  *Fetcher
	Store    *artifact.Store
}

var _ source.Kind = (*Kind)(nil)

// NewKind returns a Kind whose artifacts' chosen layer, and the files
// extracted from it, are each at most maxSize bytes (0: the default).
func NewKind(reader client.Reader, store *artifact.Store, maxSize int64) *Kind {
	f := NewFetcher()
	if maxSize > 0 {
		f.MaxSize = maxSize
	}
	return &Kind{Reader: reader, Resolver: NewResolver(), Fetcher: f, Store: store}
}

// Selected is true for spec.source.oci.
func (k *Kind) Selected(stack *v1alpha1.Stack) bool { return stack.Spec.Source.OCI != nil }

// Secrets are the registry credentials and the verification keys.
func (k *Kind) Secrets(stack *v1alpha1.Stack) []string {
	o := stack.Spec.Source.OCI
	if o == nil {
		return nil
	}
	var names []string
	if o.SecretRef != nil {
		names = append(names, o.SecretRef.Name)
	}
	if o.Verify != nil {
		names = append(names, o.Verify.SecretRef.Name)
	}
	return names
}

// Watch adds nothing: a registry is polled at spec.interval, and a
// Receiver's push event asks for a reconcile.
func (k *Kind) Watch(_ context.Context, _ ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	return b, nil
}

// Hints: a program is missing until an artifact holding it is pushed.
func (k *Kind) Hints() source.Hints {
	return source.Hints{AddFolder: "push an artifact that holds the folder", Publish: "push an artifact"}
}

// target is what a Stack's spec.source.oci resolves to before the tag:
// the repository, how to reach it and what to trust.
type target struct {
	repository string
	client     *ocilib.Client
	verifier   Verifier // nil: no verification asked
	layerType  string
}

// Resolve resolves spec.source.oci's ref with a shared lookup; a
// reconcile-now request forces a fresh one.
func (k *Kind) Resolve(ctx context.Context, stack *v1alpha1.Stack, req source.ResolveRequest) (source.Resolved, error) {
	t, err := k.target(ctx, stack)
	if err != nil {
		return source.Resolved{}, err
	}
	var opts []ResolveOption
	if req.Requested {
		opts = append(opts, Force())
	}
	rev, err := k.Resolver.Resolve(ctx, t.repository, SpecRef(stack.Spec.Source.OCI.Ref), t.client, req.MaxAge, opts...)
	if err != nil {
		return source.Resolved{}, source.Failure(err, v1alpha1.OCIOperationFailedReason)
	}
	return source.Resolved{Revision: rev.String(), Fetch: func(ctx context.Context) (artifact.Artifact, error) {
		return k.fetch(ctx, t, rev)
	}}, nil
}

func (k *Kind) fetch(ctx context.Context, t *target, rev Revision) (artifact.Artifact, error) {
	art, err := k.Fetcher.Fetch(ctx, t.repository, rev, t.client,
		FetchOptions{LayerMediaType: t.layerType, Verifier: t.verifier}, k.Store)
	if err != nil {
		return artifact.Artifact{}, fetchError(err, rev.String())
	}
	return art, nil
}

// FetchRevision fetches a revision recorded in status again (for destroy
// when the cache lost it), verified like any other.
func (k *Kind) FetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string) (artifact.Artifact, error) {
	rev, err := ParseRevision(revision)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and cannot be fetched: %w", revision, err)
	}
	t, err := k.target(ctx, stack)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and the registry settings are unusable: %w", revision, err)
	}
	art, err := k.fetch(ctx, t, rev)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is neither cached nor fetchable: %w", revision, err)
	}
	return art, nil
}

// fetchError keeps what is wrong with the artifact itself for the
// revision alone (a new push can fix it, retrying cannot) and retries the
// rest.
func fetchError(err error, revision string) error {
	var verr *VerificationError
	var limit *ocilib.LimitError
	var digest *ocilib.DigestError
	var unsafe *artifact.UnsafePathError
	var limits *artifact.LimitError
	switch {
	case errors.As(err, &verr):
		return serror.Transient(v1alpha1.VerificationFailedReason, fmt.Errorf("%w; nothing of it was applied", err))
	case errors.As(err, &limit), errors.As(err, &limits):
		return serror.StallingAt(revision, v1alpha1.ArtifactFailedReason, "%v (controller flag %s; checked again every spec.interval)", err, source.LimitFlag(err))
	case errors.As(err, &unsafe):
		return serror.StallingAt(revision, v1alpha1.ArtifactFailedReason, "%v: push an artifact without it (checked again every spec.interval)", err)
	case errors.As(err, &digest):
		return serror.Transient(v1alpha1.ArtifactFailedReason, err)
	}
	return source.Failure(err, v1alpha1.OCIOperationFailedReason)
}

// target reads spec.source.oci and the Secrets it names.
func (k *Kind) target(ctx context.Context, stack *v1alpha1.Stack) (*target, error) {
	o := stack.Spec.Source.OCI
	repo, err := ocilib.ParseURL(o.URL)
	if err != nil {
		return nil, serror.Stalling(v1alpha1.InvalidSpecReason, "spec.source.oci.url: %v", err)
	}
	t := &target{repository: repo, client: &ocilib.Client{Insecure: o.Insecure, UserAgent: "stackpilot-controller"}}
	if o.LayerSelector != nil {
		t.layerType = o.LayerSelector.MediaType
	}
	if o.SecretRef != nil {
		creds, err := k.credentials(ctx, stack.Namespace, o.SecretRef.Name, repo)
		if err != nil {
			return nil, err
		}
		t.client.Credentials = creds
	}
	if o.Verify != nil {
		v, err := k.verifier(ctx, stack.Namespace, o.Verify)
		if err != nil {
			return nil, err
		}
		t.verifier = v
	}
	return t, nil
}

// credentials reads a kubernetes.io/dockerconfigjson Secret, as an image
// pull would, and picks the entry for the repository's registry.
func (k *Kind) credentials(ctx context.Context, namespace, name, repository string) (*ocilib.Credentials, error) {
	sec, err := k.secretFor(ctx, namespace, name, "spec.source.oci.secretRef", v1alpha1.AuthenticationFailedReason)
	if err != nil {
		return nil, err
	}
	data, ok := sec.Data[corev1.DockerConfigJsonKey]
	if !ok {
		data, ok = sec.Data[corev1.DockerConfigKey]
	}
	if !ok {
		return nil, serror.Stalling(v1alpha1.AuthenticationFailedReason,
			"spec.source.oci.secretRef: Secret %s has no %s key: create it with `kubectl create secret docker-registry %s --docker-server=HOST --docker-username=... --docker-password=...`",
			name, corev1.DockerConfigJsonKey, name)
	}
	host, _, _ := strings.Cut(repository, "/")
	creds, err := ocilib.CredentialsFromDockerConfigJSON(data, host)
	if err != nil {
		return nil, serror.Stalling(v1alpha1.AuthenticationFailedReason, "spec.source.oci.secretRef (Secret %s): %v", name, err)
	}
	if creds == nil {
		return nil, serror.Stalling(v1alpha1.AuthenticationFailedReason,
			"spec.source.oci.secretRef: Secret %s holds no credentials for registry %s: add an entry for it under \"auths\"", name, host)
	}
	return creds, nil
}

// verifier reads the public keys of spec.source.oci.verify: every data
// key of the Secret ending in ".pub", as Flux does.
func (k *Kind) verifier(ctx context.Context, namespace string, v *v1alpha1.OCIVerification) (Verifier, error) {
	if v.Provider != "" && v.Provider != "cosign" {
		return nil, serror.Stalling(v1alpha1.InvalidSpecReason, "spec.source.oci.verify.provider %q is not supported: use cosign", v.Provider)
	}
	name := v.SecretRef.Name
	sec, err := k.secretFor(ctx, namespace, name, "spec.source.oci.verify.secretRef", v1alpha1.VerificationFailedReason)
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
		return nil, serror.Stalling(v1alpha1.VerificationFailedReason,
			"spec.source.oci.verify.secretRef: Secret %s has no key ending in .pub (it has %v): add the cosign public key as, for example, cosign.pub", name, have)
	}
	verifier, err := NewCosignVerifier(keys)
	if err != nil {
		return nil, serror.Stalling(v1alpha1.VerificationFailedReason, "spec.source.oci.verify.secretRef (Secret %s): %v", name, err)
	}
	return verifier, nil
}

// secretFor reads a Secret a source field names; field is for messages,
// reason for the conditions when it cannot be read.
func (k *Kind) secretFor(ctx context.Context, namespace, name, field, reason string) (*corev1.Secret, error) {
	var sec corev1.Secret
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, serror.Waiting(reason, "%s: Secret %s not found", field, name)
	}
	if err != nil {
		return nil, serror.Transient(reason, fmt.Errorf("read Secret %s: %w", name, err))
	}
	return &sec, nil
}

// SpecRef is the resolver's Ref for spec.source.oci.ref.
func SpecRef(ref *v1alpha1.OCIRef) Ref {
	if ref == nil {
		return Ref{}
	}
	return Ref{Tag: ref.Tag, SemVer: ref.SemVer, Digest: ref.Digest}
}
