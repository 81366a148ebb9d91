package dashboard

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Who may see and change what on the dashboard: the caller's own
// Kubernetes identity, never the controller's. A bearer token is reviewed
// by the API server (TokenReview); each object is then decided by a
// SubjectAccessReview for the verb kubectl would need (get to see a Stack,
// patch to approve, reconcile, suspend or resume it).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Identity is a reviewed token's user.
type Identity struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string]authzv1.ExtraValue
}

// errUnauthenticated: the API server did not accept the token.
var errUnauthenticated = errors.New("the token was not accepted by the API server")

// Access reviews tokens and decides access, remembering each answer for a
// short while: a page of 50 Stacks in one namespace costs one review, not
// fifty, and a revoked token or a removed RoleBinding counts within
// seconds.
type Access struct {
	Client client.Client
	// TokenTTL and DecisionTTL bound how long answers are kept.
	TokenTTL, DecisionTTL time.Duration
	Now                   func() time.Time

	mu        sync.Mutex
	tokens    map[[32]byte]tokenAnswer
	decisions map[decisionKey]decisionAnswer
}

type tokenAnswer struct {
	id      *Identity
	expires time.Time
}

type decisionKey struct {
	user                  string
	verb, namespace, name string
}

type decisionAnswer struct {
	allowed bool
	expires time.Time
}

// maxRemembered bounds each cache; past it, the oldest half is dropped.
const maxRemembered = 10000

func (a *Access) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Authenticate reviews token.
func (a *Access) Authenticate(ctx context.Context, token string) (*Identity, error) {
	if token == "" {
		return nil, errUnauthenticated
	}
	key := sha256.Sum256([]byte(token))
	a.mu.Lock()
	if t, ok := a.tokens[key]; ok && a.now().Before(t.expires) {
		a.mu.Unlock()
		return t.id, nil
	}
	a.mu.Unlock()
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	if err := a.Client.Create(ctx, tr); err != nil {
		return nil, fmt.Errorf("the controller could not review the token (TokenReview): %w", err)
	}
	if !tr.Status.Authenticated {
		if tr.Status.Error != "" {
			return nil, fmt.Errorf("%w: %s", errUnauthenticated, tr.Status.Error)
		}
		return nil, errUnauthenticated
	}
	u := tr.Status.User
	id := &Identity{User: u.Username, UID: u.UID, Groups: u.Groups, Extra: map[string]authzv1.ExtraValue{}}
	for k, v := range u.Extra {
		id.Extra[k] = authzv1.ExtraValue(v)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tokens == nil || len(a.tokens) >= maxRemembered {
		a.tokens = map[[32]byte]tokenAnswer{}
	}
	a.tokens[key] = tokenAnswer{id: id, expires: a.now().Add(ttl(a.TokenTTL, time.Minute))}
	return id, nil
}

// Allowed decides whether id may verb the Stacks of namespace (name ""
// for all of them) or the one named.
func (a *Access) Allowed(ctx context.Context, id *Identity, verb, namespace, name string) (bool, error) {
	key := decisionKey{user: id.User + "\x00" + id.UID, verb: verb, namespace: namespace, name: name}
	a.mu.Lock()
	if d, ok := a.decisions[key]; ok && a.now().Before(d.expires) {
		a.mu.Unlock()
		return d.allowed, nil
	}
	a.mu.Unlock()
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: id.User, UID: id.UID, Groups: id.Groups, Extra: id.Extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: v1alpha1.GroupVersion.Group, Resource: "stacks", Name: name,
		},
	}}
	if err := a.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("the controller could not check access (SubjectAccessReview): %w", err)
	}
	allowed := sar.Status.Allowed && !sar.Status.Denied
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.decisions == nil || len(a.decisions) >= maxRemembered {
		a.decisions = map[decisionKey]decisionAnswer{}
	}
	a.decisions[key] = decisionAnswer{allowed: allowed, expires: a.now().Add(ttl(a.DecisionTTL, 10*time.Second))}
	return allowed, nil
}

func ttl(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// maxObjectChecks bounds the per-Stack reviews one listing makes in a
// namespace the caller may not read whole (RBAC by resourceNames).
const maxObjectChecks = 200

// visible keeps the Stacks id may get: every Stack of a namespace it may
// read whole, and, in the others, each Stack it may get by name (at most
// maxObjectChecks reviews; partial says some were left out unchecked).
func (a *Access) visible(ctx context.Context, id *Identity, stacks []*v1alpha1.Stack) (out []*v1alpha1.Stack, partial bool, err error) {
	// Who may read every namespace's costs one review.
	if all, err := a.Allowed(ctx, id, "get", "", ""); err != nil || all {
		return stacks, false, err
	}
	whole := map[string]bool{}
	checks := 0
	for _, s := range stacks {
		ok, seen := whole[s.Namespace]
		if !seen {
			if ok, err = a.Allowed(ctx, id, "get", s.Namespace, ""); err != nil {
				return nil, false, err
			}
			whole[s.Namespace] = ok
		}
		if ok {
			out = append(out, s)
			continue
		}
		if checks == maxObjectChecks {
			partial = true
			continue
		}
		checks++
		named, err := a.Allowed(ctx, id, "get", s.Namespace, s.Name)
		if err != nil {
			return nil, false, err
		}
		if named {
			out = append(out, s)
		}
	}
	return out, partial, nil
}
