package dashboard

import (
	"crypto/tls"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackpilot/stackpilot/internal/server"
)

// Setup serves the dashboard on addr over HTTPS with cert, on every replica
// (each reads its own cache), unless addr is "0" or empty.
func Setup(mgr ctrl.Manager, addr string, cert tls.Certificate) error {
	if addr == "0" || addr == "" {
		return nil
	}
	s := NewServer(mgr.GetClient(), mgr.GetClient())
	l, err := server.NewTLSListener(addr, s.Handler(), cert, "dashboard", "serving the dashboard over HTTPS")
	if err != nil {
		return fmt.Errorf("--dashboard-bind-address: %w", err)
	}
	return mgr.Add(l)
}
