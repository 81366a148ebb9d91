package notify

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestResolveTarget(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "full"},
			Data: map[string][]byte{"address": []byte("https://secret.example/hook/xyz"), "token": []byte("tok")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}, Data: map[string][]byte{}},
	).Build()
	alert := func(typ v1alpha1.ProviderType, address, secret string) *v1alpha1.Alert {
		a := &v1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
		a.Spec.Provider = v1alpha1.AlertProvider{Type: typ, Address: address}
		if secret != "" {
			a.Spec.Provider.SecretRef = &v1alpha1.LocalObjectReference{Name: secret}
		}
		return a
	}
	ctx := context.Background()

	tg, values, err := ResolveTarget(ctx, c, alert(v1alpha1.ProviderSlack, "https://spec.example/", "full"))
	if err != nil || tg.Address != "https://secret.example/hook/xyz" || tg.Token != "tok" || len(values) != 3 {
		t.Errorf("the Secret's address wins: %+v %v %v", tg, values, err)
	}
	tg, _, err = ResolveTarget(ctx, c, alert(v1alpha1.ProviderPagerDuty, "", "full"))
	if err != nil || tg.Address != "https://secret.example/hook/xyz" {
		t.Errorf("%+v %v", tg, err)
	}
	tg, _, err = ResolveTarget(ctx, c, alert(v1alpha1.ProviderGitHub, "", "empty"))
	if te, ok := IsTargetError(err); !ok || te.Reason != v1alpha1.InputsNotFoundReason || tg.Address != v1alpha1.DefaultGitHubAddress {
		t.Errorf("github without token: %+v %v", tg, err)
	}
	tg, _, err = ResolveTarget(ctx, c, alert(v1alpha1.ProviderPagerDuty, "", "empty"))
	if _, ok := IsTargetError(err); !ok || tg.Address != v1alpha1.DefaultPagerDutyAddress {
		t.Errorf("pagerduty default address: %+v %v", tg, err)
	}
	if _, _, err = ResolveTarget(ctx, c, alert(v1alpha1.ProviderGeneric, "", "")); err == nil {
		t.Error("generic without address")
	}
	if _, _, err = ResolveTarget(ctx, c, alert(v1alpha1.ProviderGeneric, "ftp://x", "")); err == nil {
		t.Error("not http")
	}
	_, _, err = ResolveTarget(ctx, c, alert(v1alpha1.ProviderGeneric, "", "gone"))
	if te, ok := IsTargetError(err); !ok || te.Reason != v1alpha1.InputsNotFoundReason {
		t.Errorf("missing Secret: %v", err)
	}
}
