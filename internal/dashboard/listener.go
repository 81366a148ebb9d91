package dashboard

import (
	"context"
	"crypto/tls"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackpilot/stackpilot/internal/logstore"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/server"
)

// Setup serves the dashboard on addr over HTTPS with cert, on every replica
// (each reads its own cache), unless addr is "0" or empty. logs, plans
// and reviews are the stores the logs listener serves too.
func Setup(mgr ctrl.Manager, addr string, cert tls.Certificate, logs *logstore.Store, plans, reviews *plan.Store) error {
	if addr == "0" || addr == "" {
		return nil
	}
	s := NewServer(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetClient())
	if logs != nil {
		s.Logs = &server.LogsHandler{Store: logs, Reader: mgr.GetAPIReader(), Client: mgr.GetClient()}
	}
	if plans != nil {
		s.Plans = &server.PlanHandler{Store: plans, Reviews: reviews, Reader: mgr.GetClient(), Client: mgr.GetClient()}
	}
	// The cache has not started: this registers the informers' handlers,
	// which run once it has.
	if err := s.Hub.Watch(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	l, err := server.NewTLSListener(addr, s.Handler(), cert, "dashboard", "serving the dashboard over HTTPS")
	if err != nil {
		return fmt.Errorf("--dashboard-bind-address: %w", err)
	}
	return mgr.Add(l)
}
