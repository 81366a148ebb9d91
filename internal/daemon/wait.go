package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// WaitHTTP polls url with hc until it answers 200 OK, or timeout passes. When
// p is not nil it gives up as soon as p exits, with p's *ExitedError: a daemon
// that failed at start says so at once, not after the timeout.
func WaitHTTP(ctx context.Context, hc *http.Client, url string, timeout time.Duration, p *Process) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else if ctx.Err() == nil {
			// A request cut short by our own deadline says nothing about the
			// server: keep its last real answer (a 503, a refused connection)
			// for the error, which is what the reader needs.
			last = err.Error()
		}
		if p != nil {
			if err := p.Exited(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			within := "within " + timeout.String()
			if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				within = "before " + context.Cause(ctx).Error()
			}
			if p == nil {
				return fmt.Errorf("%s not ready %s (last: %s)", url, within, last)
			}
			return fmt.Errorf("%s not ready at %s %s (last: %s); see %s", p.Name, url, within, last, p.Log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
