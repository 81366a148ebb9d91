package main

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackpilot/stackpilot/internal/controller"
	"github.com/stackpilot/stackpilot/internal/receiver"
)

// setupReceivers wires the Receiver reconciler and the webhook server on
// addr ("0" disables both). Pushes invalidate git's shared ls-remote cache.
func setupReceivers(mgr ctrl.Manager, addr string, git receiver.Invalidator) error {
	if addr == "0" || addr == "" {
		return nil
	}
	index := receiver.NewIndex()
	rec := &controller.ReceiverReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Index: index}
	if err := rec.SetupWithManager(mgr); err != nil {
		return err
	}
	srv := receiver.NewServer(index, &receiver.Requester{Client: mgr.GetClient(), Git: git},
		mgr.GetClient().Status(), ctrl.Log.WithName("receiver"))
	return mgr.Add(&receiver.Listener{Addr: addr, Handler: srv})
}
