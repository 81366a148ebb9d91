package notify

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TargetError says why an Alert's provider does not resolve; Reason is the
// Ready condition's reason for it.
type TargetError struct {
	Reason string
	Msg    string
}

func (e *TargetError) Error() string { return e.Msg }

// ResolveTarget reads the Alert's Secret and returns its endpoint and the
// secret values (to scrub from anything shown). Secrets are read with an
// uncached reader: the controller caches no Secret data.
func ResolveTarget(ctx context.Context, secrets client.Reader, alert *v1alpha1.Alert) (Target, []string, error) {
	p := alert.Spec.Provider
	t := Target{Type: p.Type, Address: p.Address, Channel: p.Channel}
	var values []string
	if ref := p.SecretRef; ref != nil {
		var s corev1.Secret
		if err := secrets.Get(ctx, types.NamespacedName{Namespace: alert.Namespace, Name: ref.Name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return t, nil, &TargetError{Reason: v1alpha1.InputsNotFoundReason,
					Msg: fmt.Sprintf("Secret %s/%s of spec.provider.secretRef does not exist: create it", alert.Namespace, ref.Name)}
			}
			return t, nil, fmt.Errorf("read Secret %s/%s: %w", alert.Namespace, ref.Name, err)
		}
		for _, v := range s.Data {
			values = append(values, string(v))
		}
		if a := string(s.Data[v1alpha1.AlertAddressKey]); a != "" {
			t.Address = a
		}
		t.Token = string(s.Data[v1alpha1.AlertTokenKey])
	}
	if p.Address != "" {
		// An address in the spec may carry a credential too (a Slack webhook's path).
		values = append(values, p.Address)
	}
	if t.Address == "" {
		switch p.Type {
		case v1alpha1.ProviderPagerDuty:
			t.Address = v1alpha1.DefaultPagerDutyAddress
		case v1alpha1.ProviderGitHub:
			t.Address = v1alpha1.DefaultGitHubAddress
		default:
			return t, values, &TargetError{Reason: v1alpha1.InvalidSpecReason,
				Msg: "no address: set spec.provider.address, or the key \"address\" in the Secret of spec.provider.secretRef"}
		}
	}
	if u, err := url.Parse(t.Address); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return t, values, &TargetError{Reason: v1alpha1.InvalidSpecReason,
			Msg: "the provider's address is not an http(s) URL: fix spec.provider.address or the Secret's \"address\""}
	}
	switch p.Type {
	case v1alpha1.ProviderGitHub, v1alpha1.ProviderPagerDuty, v1alpha1.ProviderGenericHMAC:
		if t.Token == "" {
			return t, values, &TargetError{Reason: v1alpha1.InputsNotFoundReason,
				Msg: fmt.Sprintf("provider %s needs the key %q in the Secret of spec.provider.secretRef", p.Type, v1alpha1.AlertTokenKey)}
		}
	}
	return t, values, nil
}

// IsTargetError reports a TargetError.
func IsTargetError(err error) (*TargetError, bool) {
	var te *TargetError
	return te, errors.As(err, &te)
}

// stackSecretValues reads the values of the Stack's Secrets (missing ones
// are skipped: they cannot have leaked into its status either).
func stackSecretValues(ctx context.Context, secrets client.Reader, ns string, names []string) []string {
	var values []string
	for _, n := range names {
		var s corev1.Secret
		if err := secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, &s); err != nil {
			continue
		}
		for _, v := range s.Data {
			values = append(values, string(v))
		}
	}
	return values
}
