package controller

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// authorizeStackRead answers 0 when the caller of req may get the Stack at
// key, else the HTTP status and why; what says what the access is for, in
// the 403's message. The caller is whoever the bearer token in
// X-Stackpilot-Token (else in Authorization, for a caller that reaches the
// controller directly) is, as a TokenReview says; a SubjectAccessReview
// decides. The logs and the full plans hold what `kubectl get stack` shows
// and more (resource names, property paths, Pulumi's output), so they are
// served to exactly those who may get the Stack, whatever the port is
// reachable from.
func authorizeStackRead(ctx context.Context, cl client.Client, req *http.Request, key client.ObjectKey, what string) (int, string) {
	token := strings.TrimSpace(req.Header.Get(TokenHeader))
	if token == "" {
		token, _ = strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		token = strings.TrimSpace(token)
	}
	if token == "" {
		return http.StatusUnauthorized, "no bearer token: send it in the " + TokenHeader + " header"
	}
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	if err := cl.Create(ctx, tr); err != nil {
		return http.StatusInternalServerError, fmt.Sprintf("the controller could not review the token (TokenReview): %v", err)
	}
	if !tr.Status.Authenticated {
		msg := "the token was not accepted by the API server"
		if tr.Status.Error != "" {
			msg += ": " + tr.Status.Error
		}
		return http.StatusUnauthorized, msg
	}
	user := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: key.Namespace, Verb: "get", Group: v1alpha1.GroupVersion.Group, Resource: "stacks", Name: key.Name,
		},
	}}
	if err := cl.Create(ctx, sar); err != nil {
		return http.StatusInternalServerError, fmt.Sprintf("the controller could not check access (SubjectAccessReview): %v", err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		msg := fmt.Sprintf("%s may not get stacks.%s %q in namespace %q, which %s needs", user.Username, v1alpha1.GroupVersion.Group, key.Name, key.Namespace, what)
		if sar.Status.Reason != "" {
			msg += " (" + sar.Status.Reason + ")"
		}
		return http.StatusForbidden, msg
	}
	return 0, ""
}
