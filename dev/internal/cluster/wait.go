package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/transport"

	"github.com/stackpilot/stackpilot/internal/daemon"
)

// waitHTTP polls url until it answers 200. With caAndToken (CA file, bearer
// token) it speaks HTTPS to the API server. It gives up early when p exits.
func waitHTTP(ctx context.Context, url string, timeout time.Duration, p *daemon.Process, caAndToken ...string) error {
	client := &http.Client{Timeout: 5 * time.Second}
	if len(caAndToken) == 2 {
		pem, err := os.ReadFile(caAndToken[0])
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		client.Transport = transport.NewBearerAuthRoundTripper(caAndToken[1],
			&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})
	}
	return daemon.WaitHTTP(ctx, client, url, timeout, p)
}

// poll calls cond until it returns true, an error, or timeout passes; any of the
// cluster's processes exiting ends it early.
func (c *Cluster) poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("cluster: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		for _, p := range c.procs {
			if err := p.Exited(); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s not there within %s", what, timeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
