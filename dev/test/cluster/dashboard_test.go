package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
	"github.com/stackpilot/stackpilot/internal/daemon"
)

// buildCLI starts `go build ./cmd/stackpilot` aside (it takes a while on a
// loaded machine, while the cluster installs); the returned func waits for
// it and returns the binary.
func buildCLI(t *testing.T, root string) func() string {
	bin := filepath.Join(t.TempDir(), "stackpilot")
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/stackpilot")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("go build ./cmd/stackpilot: %v\n%s", err, out)
		}
		done <- err
	}()
	var err error
	return func() string {
		t.Helper()
		once.Do(func() { err = <-done })
		if err != nil {
			t.Fatal(err)
		}
		return bin
	}
}

// testDashboardCLI runs `stackpilot dashboard` as a user would, against the
// controller Install put in the cluster: through a port-forward to the
// controller's Pod (the default), on a chosen local port. A browser-like
// client with a cookie jar signs in with the code of the printed link,
// lists the fleet (the cluster's Stacks, all of them: the kubeconfig's user
// is an admin) and asks for a reconcile, which the controller accepts only
// with the session's CSRF token and its own origin: the proxy's rewrite.
func testDashboardCLI(t *testing.T, c *testenv.Cluster, cli string, stack client.ObjectKey) {
	g := NewWithT(t)
	port, err := daemon.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "--kubeconfig", c.Kubeconfig, "dashboard", "--port", strconv.Itoa(port))
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) } // Ctrl-C
	cmd.WaitDelay = 30 * time.Second
	var stderr testenv.SyncBuffer // written by exec's copier while read here
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd.Start()).To(Succeed())
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var link string
	select {
	case link = <-lines:
	case <-time.After(3 * time.Minute):
		t.Fatalf("stackpilot dashboard printed no link in 3 minutes; stderr:\n%s", stderr.String())
	}
	page := fmt.Sprintf("http://localhost:%d/", port)
	g.Expect(link).To(HavePrefix(page+"#code="), stderr.String())
	// stderr is copied on its own: its lines may come after the link.
	g.Eventually(stderr.String, time.Minute).Should(ContainSubstring("Ctrl-C stops it."))
	t.Logf("stackpilot dashboard: %s\n%s", link, stderr.String())
	g.Expect(stderr.String()).To(ContainSubstring("signed in as "))
	cfg, err := c.RESTConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link+stderr.String()).NotTo(ContainSubstring(cfg.BearerToken), "the token is printed")

	// The page reads the code from the fragment and signs in with it.
	jar, err := cookiejar.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	browser := &http.Client{Jar: jar, Timeout: time.Minute}
	send := func(method, path, body string, header map[string]string) []byte {
		t.Helper()
		req, err := http.NewRequest(method, page+path, strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Origin", strings.TrimSuffix(page, "/"))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := browser.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		data, _ := io.ReadAll(resp.Body)
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s %s: %s", method, path, data)
		return data
	}
	code, _ := url.QueryUnescape(strings.TrimPrefix(link, page+"#code="))
	var session struct{ User, CSRF string }
	g.Expect(json.Unmarshal(send(http.MethodPost, "api/session", `{"code":"`+code+`"}`, nil), &session)).To(Succeed())
	g.Expect(session.User).NotTo(BeEmpty())
	g.Expect(session.CSRF).NotTo(BeEmpty())

	var fleet struct {
		Total int
		Rows  []struct{ Namespace, Name string }
	}
	g.Expect(json.Unmarshal(send(http.MethodGet, "api/fleet?pageSize=500", "", nil), &fleet)).To(Succeed())
	var stacks v1alpha1.StackList
	g.Expect(c.Client.List(ctx, &stacks)).To(Succeed())
	var want, got []string
	for _, s := range stacks.Items {
		want = append(want, s.Namespace+"/"+s.Name)
	}
	for _, r := range fleet.Rows {
		got = append(got, r.Namespace+"/"+r.Name)
	}
	sort.Strings(want)
	sort.Strings(got)
	g.Expect(got).To(Equal(want), "the dashboard's fleet is not the cluster's Stacks")
	g.Expect(fleet.Total).To(Equal(len(want)))

	// A change from the page: the session's CSRF token, and the page's
	// origin, which the proxy turns into the controller's own.
	send(http.MethodPost, "api/stacks/"+stack.Namespace+"/"+stack.Name+"/reconcile", "", map[string]string{"X-Stackpilot-CSRF": session.CSRF})

	// Ctrl-C ends it, exit 0.
	g.Expect(cmd.Process.Signal(os.Interrupt)).To(Succeed())
	g.Expect(cmd.Wait()).To(Succeed(), stderr.String())
}
