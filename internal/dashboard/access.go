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
	user                            string
	verb, resource, namespace, name string
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

// The resources of stackpilot.dev the dashboard shows.
const (
	resourceStacks    = "stacks"
	resourceReceivers = "receivers"
	resourceAlerts    = "alerts"
)

// Allowed decides whether id may verb the objects of resource (stacks,
// receivers, alerts) in namespace (name "" for all of them) or the one
// named.
func (a *Access) Allowed(ctx context.Context, id *Identity, verb, resource, namespace, name string) (bool, error) {
	key := decisionKey{user: id.User + "\x00" + id.UID, verb: verb, resource: resource, namespace: namespace, name: name}
	a.mu.Lock()
	if d, ok := a.decisions[key]; ok && a.now().Before(d.expires) {
		a.mu.Unlock()
		return d.allowed, nil
	}
	a.mu.Unlock()
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: id.User, UID: id.UID, Groups: id.Groups, Extra: id.Extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: v1alpha1.GroupVersion.Group, Resource: resource, Name: name,
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

// visible keeps the objects of resource id may get: every one of a
// namespace it may read whole, and, in the others, each it may get by name
// (at most maxObjectChecks reviews; partial says some were left out
// unchecked).
func visible[T client.Object](ctx context.Context, a *Access, id *Identity, resource string, objs []T) (out []T, partial bool, err error) {
	// Who may read every namespace's costs one review.
	if all, err := a.Allowed(ctx, id, "get", resource, "", ""); err != nil || all {
		return objs, false, err
	}
	whole := map[string]bool{}
	checks := 0
	for _, o := range objs {
		ns := o.GetNamespace()
		ok, seen := whole[ns]
		if !seen {
			if ok, err = a.Allowed(ctx, id, "get", resource, ns, ""); err != nil {
				return nil, false, err
			}
			whole[ns] = ok
		}
		if ok {
			out = append(out, o)
			continue
		}
		if checks == maxObjectChecks {
			partial = true
			continue
		}
		checks++
		named, err := a.Allowed(ctx, id, "get", resource, ns, o.GetName())
		if err != nil {
			return nil, false, err
		}
		if named {
			out = append(out, o)
		}
	}
	return out, partial, nil
}

// mayGet decides whether id may get one object as visible does: all
// namespaces, then the namespace, then the object by name; the first two
// answers are shared by every object, so a stream of changes costs few
// reviews.
func (a *Access) mayGet(ctx context.Context, id *Identity, resource, namespace, name string) (bool, error) {
	for _, scope := range [][2]string{{"", ""}, {namespace, ""}, {namespace, name}} {
		ok, err := a.Allowed(ctx, id, "get", resource, scope[0], scope[1])
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
