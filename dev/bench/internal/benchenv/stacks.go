package benchenv

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Passphrase encrypts the benchmark stacks' secrets (there are none).
const Passphrase = "stackpilot-bench-passphrase"

// PassphraseSecret is the Secret (key "passphrase") every benchmark Stack names.
const PassphraseSecret = "pulumi-passphrase"

// Namespace creates namespace ns with the passphrase Secret in it.
func (e *Env) Namespace(ctx context.Context, ns string) error {
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	return e.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: PassphraseSecret, Namespace: ns},
		StringData: map[string]string{"passphrase": Passphrase},
	})
}

// StackSpec is what a benchmark Stack varies.
type StackSpec struct {
	Namespace, Name string
	Labels          map[string]string
	URL, Branch     string
	Dir             string
	Backend         string // empty: the controller's default
	Interval        time.Duration
	Config          map[string]any
	// Drift is spec.driftDetection; nil leaves the default (hourly checks).
	Drift *v1alpha1.DriftDetection
}

// Stack builds the Stack object.
func (s StackSpec) Stack() (*v1alpha1.Stack, error) {
	cfg := map[string]apiextensionsv1.JSON{}
	for k, v := range s.Config {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		cfg[k] = apiextensionsv1.JSON{Raw: raw}
	}
	return &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{
				Git: &v1alpha1.GitSource{URL: s.URL, Ref: &v1alpha1.GitRef{Branch: s.Branch}},
				Dir: s.Dir,
			},
			Backend:         s.Backend,
			SecretsProvider: &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: PassphraseSecret}},
			Config:          cfg,
			Interval:        metav1.Duration{Duration: s.Interval},
			RetryInterval:   &metav1.Duration{Duration: 5 * time.Second},
			DriftDetection:  s.Drift,
		},
	}, nil
}

// Applied is true when s is Ready, observed at its generation, with the last
// applied revision ending in commit (any revision when commit is "").
func Applied(s *v1alpha1.Stack, commit string) bool {
	return conditions.IsReady(s) &&
		s.Status.ObservedGeneration == s.Generation &&
		(commit == "" || strings.HasSuffix(s.Status.LastAppliedRevision, commit))
}

// ReadyMessage is the Ready condition, for error messages.
func ReadyMessage(s *v1alpha1.Stack) string {
	c := conditions.Get(s, v1alpha1.ReadyCondition)
	if c == nil {
		return "<no Ready condition>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// RequestReconcile sets the reconcile-now annotation to now, as a webhook
// receiver would.
func (e *Env) RequestReconcile(ctx context.Context, key client.ObjectKey) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano))
	s := &v1alpha1.Stack{}
	s.Name, s.Namespace = key.Name, key.Namespace
	return e.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// CountApplied lists the Stacks in ns and counts those Applied at commit.
// notReady holds up to three of the others, for progress lines.
func (e *Env) CountApplied(ctx context.Context, ns, commit string) (applied, total int, notReady []string, err error) {
	var list v1alpha1.StackList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, 0, nil, err
	}
	applied, notReady = countApplied(list.Items, commit)
	return applied, len(list.Items), notReady, nil
}

// countApplied counts the Stacks Applied at commit and names up to three of
// the others with their Ready condition.
func countApplied(stacks []v1alpha1.Stack, commit string) (applied int, notReady []string) {
	for i := range stacks {
		s := &stacks[i]
		if Applied(s, commit) {
			applied++
		} else if len(notReady) < 3 {
			notReady = append(notReady, s.Name+" ("+ReadyMessage(s)+")")
		}
	}
	return applied, notReady
}

// poll is how often WaitAllApplied lists the Stacks: Env.Poll, 2s by default.
func (e *Env) poll() time.Duration {
	if e.Poll > 0 {
		return e.Poll
	}
	return 2 * time.Second
}

// WaitAllApplied waits until want Stacks in ns are Applied at commit, calling
// progress every `every`. It returns how many were applied when it stopped:
// at want, or at the timeout (with an error).
func (e *Env) WaitAllApplied(ctx context.Context, ns, commit string, want int, timeout, every time.Duration, progress func(applied int)) (int, error) {
	count := func(ctx context.Context) (int, []string, error) {
		applied, _, notReady, err := e.CountApplied(ctx, ns, commit)
		return applied, notReady, err
	}
	return waitAllApplied(ctx, count, want, timeout, every, e.poll(), progress)
}

// waitAllApplied calls count every poll until it says want Stacks are
// applied or timeout passes, and progress every `every`.
func waitAllApplied(ctx context.Context, count func(context.Context) (applied int, notReady []string, err error),
	want int, timeout, every, poll time.Duration, progress func(applied int)) (int, error) {
	deadline := time.Now().Add(timeout)
	lastProgress := time.Now()
	for {
		applied, notReady, err := count(ctx)
		if err != nil {
			return 0, err
		}
		if applied >= want {
			return applied, nil
		}
		if time.Now().After(deadline) {
			return applied, fmt.Errorf("%d of %d Stacks applied after %s; for example: %s", applied, want, timeout, strings.Join(notReady, "; "))
		}
		if time.Since(lastProgress) >= every {
			progress(applied)
			lastProgress = time.Now()
		}
		if err := Sleep(ctx, poll); err != nil {
			return applied, err
		}
	}
}

// SettleApplied is how a benchmark that ran out of time goes on with the
// Stacks that made it: it suspends the others in ns (SuspendNotApplied),
// waits 30 s for operations in flight, and returns the names of those
// Applied at commit.
func (e *Env) SettleApplied(ctx context.Context, ns, commit string) ([]string, error) {
	if err := e.SuspendNotApplied(ctx, ns, commit); err != nil {
		return nil, err
	}
	if err := Sleep(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	return e.AppliedNames(ctx, ns, commit)
}

// WaitApplied polls the Stack every 50ms until it is Applied at commit and
// returns it.
func (e *Env) WaitApplied(ctx context.Context, key client.ObjectKey, commit string, timeout time.Duration) (*v1alpha1.Stack, error) {
	deadline := time.Now().Add(timeout)
	for {
		s := &v1alpha1.Stack{}
		if err := e.Client.Get(ctx, key, s); err != nil {
			return nil, err
		}
		if Applied(s, commit) {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("the Stack %s is not Ready at %s within %s: %s", key, commit[:12], timeout, ReadyMessage(s))
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// AppliedNames lists the Stacks in ns Applied at commit and not suspended
// (one suspended in the middle of its up may end Applied).
func (e *Env) AppliedNames(ctx context.Context, ns, commit string) ([]string, error) {
	var list v1alpha1.StackList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var names []string
	for i := range list.Items {
		if Applied(&list.Items[i], commit) && !list.Items[i].Spec.Suspend {
			names = append(names, list.Items[i].Name)
		}
	}
	return names, nil
}

// SuspendNotApplied sets spec.suspend on every Stack in ns not Applied at
// commit, so that a benchmark that ran out of time measures with the others.
func (e *Env) SuspendNotApplied(ctx context.Context, ns, commit string) error {
	var list v1alpha1.StackList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range list.Items {
		s := &list.Items[i]
		if Applied(s, commit) {
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Suspend = true
		if err := e.Client.Patch(ctx, s, patch); err != nil {
			return err
		}
	}
	return nil
}

// RequestAll sets the reconcile-now annotation on the named Stacks in ns,
// parallel patches at a time, as a webhook receiver would.
func (e *Env) RequestAll(ctx context.Context, ns string, names []string, parallel int) error {
	return Parallel(ctx, len(names), parallel, func(i int) error {
		return e.RequestReconcile(ctx, client.ObjectKey{Namespace: ns, Name: names[i]})
	})
}
