package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/wire"
)

// Who the caller of the logs and plans is, and whether they may get the Stack.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// readableStack is the Stack at key, read with reader once the caller of
// req may get it (authorizeStackRead, with cl); else nil and the HTTP
// status and message to answer. what says what the access is for, in the
// 403's message.
func readableStack(ctx context.Context, reader client.Reader, cl client.Client, req *http.Request, key client.ObjectKey, what string) (*v1alpha1.Stack, int, string) {
	if code, msg := authorizeStackRead(ctx, cl, req, key, what); code != 0 {
		return nil, code, msg
	}
	stack := &v1alpha1.Stack{}
	if err := reader.Get(ctx, key, stack); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, http.StatusNotFound, fmt.Sprintf("no Stack %s", key)
		}
		return nil, http.StatusInternalServerError, fmt.Sprintf("read Stack %s: %v", key, err)
	}
	return stack, 0, ""
}

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
	token := strings.TrimSpace(req.Header.Get(wire.TokenHeader))
	if token == "" {
		token, _ = strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		token = strings.TrimSpace(token)
	}
	if token == "" {
		return http.StatusUnauthorized, "no bearer token: send it in the " + wire.TokenHeader + " header"
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
