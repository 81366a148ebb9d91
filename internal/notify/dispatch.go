package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// MaxLastError bounds status.lastError.
const MaxLastError = 512

// drain sends the Alert's messages one after the other, in order.
func (n *Notifier) drain(ctx context.Context, alert types.NamespacedName, q *queue) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.done:
			return
		case ev := <-q.ch:
			n.deliver(ctx, alert, ev)
		}
	}
}

// deliver sends one message with retries; the Alert is read again so that
// a change of its spec (or its Secret) applies to queued messages.
func (n *Notifier) deliver(ctx context.Context, key types.NamespacedName, ev Event) {
	l := log.FromContext(ctx).WithValues("alert", key.String(), "stack", ev.Namespace+"/"+ev.Name, "event", ev.Type)
	var alert v1alpha1.Alert
	if err := n.Client.Get(ctx, key, &alert); err != nil {
		if !apierrors.IsNotFound(err) {
			l.Error(err, "read Alert")
		}
		return
	}
	if alert.Spec.Suspend {
		return
	}
	provider := string(alert.Spec.Provider.Type)
	t, values, err := ResolveTarget(ctx, n.Secrets, &alert)
	scrub := NewScrubber(append(values, stackSecretValues(ctx, n.Secrets, ev.Namespace, ev.SecretRefs)...))
	if err != nil {
		n.giveUp(&alert, provider, scrub.String(err.Error()), ev)
		return
	}
	req, err := Build(t, scrub.Event(ev))
	if errors.Is(err, ErrSkip) {
		return
	}
	if err != nil {
		n.giveUp(&alert, provider, scrub.String(err.Error()), ev)
		return
	}
	backoff := n.Backoff
	for try := 1; ; try++ {
		err = n.send(ctx, req)
		if err == nil {
			sentTotal.WithLabelValues(provider, OutcomeSuccess).Inc()
			n.record(key, func(s *Stats) { s.Sent++; s.LastSent, s.Failing = ptrNow(), false })
			return
		}
		var perm *permanentError
		if try >= max(1, n.Tries) || errors.As(err, &perm) || ctx.Err() != nil {
			break
		}
		l.V(1).Info("delivery failed, retrying", "try", try, "in", backoff.String(), "error", scrub.String(err.Error()))
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	msg := scrub.String(err.Error())
	l.Info("gave up on a message", "error", msg)
	n.giveUp(&alert, provider, msg, ev)
}

func (n *Notifier) giveUp(alert *v1alpha1.Alert, provider, msg string, ev Event) {
	sentTotal.WithLabelValues(provider, OutcomeFailure).Inc()
	msg = cut(fmt.Sprintf("%s message of Stack %s/%s not delivered: %s", ev.Type, ev.Namespace, ev.Name, msg), MaxLastError)
	if n.Recorder != nil {
		n.Recorder.Event(alert, corev1.EventTypeWarning, v1alpha1.DeliveryFailedReason, msg)
	}
	n.record(types.NamespacedName{Namespace: alert.Namespace, Name: alert.Name}, func(s *Stats) {
		s.Failures++
		s.LastError, s.LastErrorAt, s.Failing = msg, ptrNow(), true
	})
}

// permanentError: retrying cannot help (the endpoint refused the request,
// or answered a redirect, which is not followed, or the address is refused).
type permanentError struct {
	status int
	msg    string
}

func (e *permanentError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return "the endpoint answered " + strconv.Itoa(e.status) + " " + http.StatusText(e.status)
}

// send makes one try. Its errors never quote the URL (a webhook's address
// is a credential) nor a transport error's text (transportClass); the
// detail is logged for the controller's operators.
func (n *Notifier) send(ctx context.Context, r *Request) error {
	ctx, cancel := context.WithTimeout(ctx, n.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return errors.New("bad request URL: check the provider's address")
	}
	req.Header = r.Header.Clone()
	hc := n.HTTP
	if hc == nil {
		hc = NewHTTPClient(false)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s", n.timeout())
		}
		log.FromContext(ctx).V(1).Info("notification transport error", "host", req.URL.Host, "detail", err.Error())
		if errors.Is(err, errInternalAddress) {
			return &permanentError{msg: errInternalAddress.Error()}
		}
		return errors.New(transportClass(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode < 400:
		return &permanentError{status: resp.StatusCode, msg: fmt.Sprintf(
			"the endpoint answered %d %s, a redirect, which is not followed: set the provider's address to the final URL",
			resp.StatusCode, http.StatusText(resp.StatusCode))}
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout:
		return fmt.Errorf("the endpoint answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	default:
		return &permanentError{status: resp.StatusCode}
	}
}

func (n *Notifier) timeout() time.Duration {
	if n.Timeout > 0 {
		return n.Timeout
	}
	return DefaultTimeout
}

func itoa(i int) string { return strconv.Itoa(i) }
