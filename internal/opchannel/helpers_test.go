package opchannel

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// channel is a Server behind a real TLS Listener on loopback.
type channel struct {
	t        *testing.T
	srv      *Server
	endpoint string
	caFile   string
	client   *http.Client
}

// newChannel serves srv.Handler(), or wrap(srv.Handler()) to play a
// controller that sends something else.
func newChannel(t *testing.T, wrap func(http.Handler) http.Handler) *channel {
	t.Helper()
	srv := NewServer()
	l, caPEM, err := Listen("127.0.0.1:0", "https://127.0.0.1", "")
	if err != nil {
		t.Fatal(err)
	}
	l.Handler = srv.Handler()
	if wrap != nil {
		l.Handler = wrap(l.Handler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listener: %v", err)
		}
	})
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: time.Minute}
	return &channel{t: t, srv: srv, endpoint: "https://" + l.Addr().String(), caFile: caFile, client: client}
}

// call makes one request as a Pod would and returns the status and text.
func (c *channel) call(method, id, what, credential string, body []byte) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.endpoint+pathPrefix+id+"/"+what, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// podOptions writes the credential where the Pod reads it.
func (c *channel) podOptions(id, credential string) PodOptions {
	c.t.Helper()
	dir := c.t.TempDir()
	credFile := filepath.Join(dir, "credential")
	if err := os.WriteFile(credFile, []byte(credential+"\n"), 0o400); err != nil {
		c.t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		c.t.Fatal(err)
	}
	return PodOptions{Endpoint: c.endpoint, CAFile: c.caFile, CredentialFile: credFile, OperationID: id, WorkRoot: work}
}

// makeTree makes a tree of files (path → content) and returns it and its digest.
func makeTree(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := artifact.Digest(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, d
}

// newOp is an operation of tree with the controller's files in a temp dir.
func newOp(t *testing.T, id, tree, digest string, spec runner.Spec) Operation {
	t.Helper()
	spec.APIVersion, spec.ID = runner.APIVersion, id
	if spec.Type == "" {
		spec.Type = runner.OpUp
	}
	dir := t.TempDir()
	return Operation{
		ID: id, StackUID: "uid-" + id, Stack: "team/" + id, Spec: spec, Digest: digest, TreeDir: tree,
		LogFile: filepath.Join(dir, "logs", id+".log"), ProgressFile: filepath.Join(dir, "progress.json"),
		Expires: time.Now().Add(time.Hour),
	}
}

// result waits for the operation's result; a Pod that delivered one has
// done so before RunPod returned.
func (c *channel) result(id string) runner.Result {
	c.t.Helper()
	select {
	case res := <-c.srv.Result(id):
		return res
	case <-time.After(time.Minute):
		c.t.Fatalf("no result for %s", id)
		return runner.Result{}
	}
}

func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func noResult(t *testing.T, srv *Server, id string) {
	t.Helper()
	select {
	case res := <-srv.Result(id):
		t.Fatalf("operation %s got a result: %+v", id, res)
	default:
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
