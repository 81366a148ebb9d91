package opchannel

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// maxSpecBytes bounds the spec a Pod accepts.
const maxSpecBytes = 16 << 20

// requestTimeout bounds every request but the artifact's.
const requestTimeout = time.Minute

// podClient makes the Pod's requests to one operation's endpoints.
type podClient struct {
	http       *http.Client
	base       string // https://host:port/v1/operations/<id>/
	credential string
}

// StatusError is an answer of the controller that was not a success.
type StatusError struct {
	Code int
	Text string // the controller's short text, bounded
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("the controller answered %d %s: %s", e.Code, http.StatusText(e.Code), e.Text)
}

func newPodClient(o PodOptions) (*podClient, error) {
	u, err := url.Parse(o.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want https://host:port", o.Endpoint)
	}
	if o.OperationID == "" || strings.ContainsAny(o.OperationID, `/\?#%`) {
		return nil, fmt.Errorf("operation ID %q cannot be a path segment", o.OperationID)
	}
	caPEM, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", o.CAFile)
	}
	cred, err := os.ReadFile(o.CredentialFile)
	if err != nil {
		return nil, fmt.Errorf("credential file: %w", err)
	}
	credential := strings.TrimSpace(string(cred))
	if credential == "" {
		return nil, fmt.Errorf("credential file %s is empty", o.CredentialFile)
	}
	transport := &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: requestTimeout,
		// The Pod talks to the controller only: no proxy from its environment.
		Proxy: nil,
	}
	base := strings.TrimSuffix(o.Endpoint, "/") + pathPrefix + url.PathEscape(o.OperationID) + "/"
	return &podClient{http: &http.Client{Transport: transport}, base: base, credential: credential}, nil
}

// do sends one request and returns the answer of a 2xx; anything else is a
// *StatusError (with the body's start) or the transport's error.
func (c *podClient) do(ctx context.Context, method, what string, query url.Values, body []byte) (*http.Response, error) {
	u := c.base + what
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.credential)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return resp, &StatusError{Code: resp.StatusCode, Text: strings.TrimSpace(string(text))}
	}
	return resp, nil
}

// send is do for a request whose answer's body does not matter.
func (c *podClient) send(ctx context.Context, method, what string, query url.Values, body []byte) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.do(ctx, method, what, query, body)
	if err != nil {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return resp, nil
}

func (c *podClient) getSpec(ctx context.Context) (podSpec, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var ps podSpec
	resp, err := c.do(ctx, http.MethodGet, "spec", nil, nil)
	if err != nil {
		return ps, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSpecBytes+1))
	if err != nil {
		return ps, err
	}
	if len(b) > maxSpecBytes {
		return ps, fmt.Errorf("the spec is larger than %d bytes", maxSpecBytes)
	}
	if err := json.Unmarshal(b, &ps); err != nil {
		return ps, fmt.Errorf("the spec is not JSON: %w", err)
	}
	return ps, nil
}

// getBody opens a GET's body; the caller closes it.
func (c *podClient) getBody(ctx context.Context, what string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, what, nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// postLog sends log bytes from offset and returns where to send from next.
func (c *podClient) postLog(ctx context.Context, offset int64, data []byte) (int64, error) {
	resp, err := c.send(ctx, http.MethodPost, "log", url.Values{"offset": {strconv.FormatInt(offset, 10)}}, data)
	if resp == nil {
		return offset, err
	}
	next, perr := strconv.ParseInt(resp.Header.Get(logOffsetHeader), 10, 64)
	if perr != nil {
		next = offset
	}
	return next, err
}

// permanent says an answer will not change by asking again. A 403 may: a
// restarted controller knows the operation only once it adopted the Job.
func permanent(err error) bool {
	if _, ok := errors.AsType[*final](err); ok {
		return true
	}
	se, ok := errors.AsType[*StatusError](err)
	if !ok {
		return false
	}
	switch se.Code {
	case http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return se.Code/100 == 4
}

// backoff is the wait before attempt n (0-based): 0.5s doubling up to 10s.
func backoff(n int) time.Duration {
	return min(500*time.Millisecond<<min(n, 5), 10*time.Second)
}

// retry calls f until it succeeds, fails permanently, or patience or ctx ends.
func retry(ctx context.Context, patience time.Duration, f func(context.Context) error) error {
	deadline := time.Now().Add(patience)
	for n := 0; ; n++ {
		err := f(ctx)
		if err == nil || permanent(err) {
			return err
		}
		wait := backoff(n)
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}
