package receiver

import (
	ctrl "sigs.k8s.io/controller-runtime"

	webhook "github.com/stackpilot/stackpilot/internal/receiver"
)

// Setup wires the Receiver reconciler and the webhook server on addr ("0"
// disables both): they share the Index, which the reconciler fills and the
// server reads. Pushes invalidate git's shared ls-remote cache.
func Setup(mgr ctrl.Manager, addr string, git webhook.Invalidator) error {
	if addr == "0" || addr == "" {
		return nil
	}
	index := webhook.NewIndex()
	rec := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Index: index}
	if err := rec.SetupWithManager(mgr); err != nil {
		return err
	}
	srv := webhook.NewServer(index, &webhook.Requester{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Git: git},
		mgr.GetClient().Status(), ctrl.Log.WithName("receiver"))
	return mgr.Add(&webhook.Listener{Addr: addr, Handler: srv})
}
