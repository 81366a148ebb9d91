package inputs

import (
	"bytes"
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/serror"
)

var keySecret = types.NamespacedName{Namespace: "stackpilot-system", Name: "stackpilot-digest-key"}

func TestDigestKeyCreatedOnceAndShared(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()

	first := &DigestKey{Client: c, Reader: c, Secret: keySecret}
	key, err := first.Get(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(key).To(HaveLen(32))
	g.Expect(key).NotTo(Equal(make([]byte, 32)), "random, not zero")

	var s corev1.Secret
	g.Expect(c.Get(ctx, keySecret, &s)).To(Succeed())
	g.Expect(s.Data[DigestKeyDataKey]).To(Equal(key), "kept in the Secret")

	// Another replica, or this one after a restart, reads the same key.
	second := &DigestKey{Client: c, Reader: c, Secret: keySecret}
	again, err := second.Get(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(key))
}

// Two replicas start at once: both find no Secret, one create wins; the other
// gets AlreadyExists and must use the winner's key, not its own.
func TestDigestKeyConcurrentCreate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	winner := bytes.Repeat([]byte{42}, 32)
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keySecret.Name, Namespace: keySecret.Namespace},
				Data: map[string][]byte{DigestKeyDataKey: winner}}
			if err := c.Create(ctx, other); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...) // AlreadyExists now
		},
	}).Build()
	key, err := (&DigestKey{Client: c, Reader: c, Secret: keySecret}).Get(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(key).To(Equal(winner))
}

func TestDigestKeyRefusesAShortKey(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: keySecret.Name, Namespace: keySecret.Namespace},
		Data:       map[string][]byte{DigestKeyDataKey: []byte("short")},
	}).Build()
	_, err := (&DigestKey{Client: c, Reader: c, Secret: keySecret}).Get(context.Background())
	g.Expect(err).To(MatchError(ContainSubstring("delete the Secret")))
	var te *serror.TransientError
	g.Expect(errors.As(err, &te)).To(BeTrue())
	g.Expect(te.Reason).To(Equal(v1alpha1.DigestKeyUnavailableReason))
}
