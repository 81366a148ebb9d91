// Command dashboard measures the web dashboard's fleet API with many
// Stacks: n suspended Stacks (so that no operation runs) are created and
// listed by the controller's cache, and then the
// first page of the fleet, a deep page, a state filter, a label selector and
// the sort by state are each asked for -samples times as a user who may read
// every namespace. It prints the median and the slowest answer of each.
// Then (unless -browser=false) a headless Chromium loads the fleet page
// -samples times, and the time to its first paint of the table's rows is
// printed against the target (1 s). Paging is the server's, so
// the answer's size does not grow with n.
//
//	go -C dev run ./bench/dashboard [-n 10000] [-samples 20] [-timeout 30m] [-browser=false] [-v] [-keep]
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

const (
	namespace = "bench-dashboard"
	repo      = "dashboard"
	branch    = "main"
)

type options struct {
	n, samples, workers int
	timeout             time.Duration
	verbose, keep       bool
	browser             bool
}

func main() {
	benchenv.OwnFlags()
	var o options
	flag.IntVar(&o.n, "n", 10000, "Number of Stacks.")
	flag.IntVar(&o.samples, "samples", 20, "Requests per query.")
	flag.IntVar(&o.workers, "workers", 8, "Stacks created at once.")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "Bound on the wait until the dashboard lists every Stack.")
	flag.BoolVar(&o.verbose, "v", false, "Copy the controller's log to stderr.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the temporary directory.")
	flag.BoolVar(&o.browser, "browser", true, "Also load the fleet page in a headless Chromium and time its first paint.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/dashboard:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	e, err := benchenv.Start(ctx, "dashboard", fmt.Sprintf("dashboard: the fleet API over %d Stacks, against a 1 s first paint", o.n), os.Stdout)
	if err != nil {
		return err
	}
	e.Verbose, e.Keep = o.verbose, o.keep
	defer e.Close()
	if err := e.Namespace(ctx, namespace); err != nil {
		return err
	}
	if _, err := e.Commit(repo, branch, map[string]string{"app/Pulumi.yaml": benchenv.ConfigMapProgram("dashboard", 0, false)}, "run 0"); err != nil {
		return err
	}
	ctrl, err := e.StartController(ctx, namespace)
	if err != nil {
		return err
	}
	token, err := viewerToken(ctx, e)
	if err != nil {
		return err
	}

	t0 := time.Now()
	if err := createStacks(ctx, e, o); err != nil {
		return err
	}
	e.Logf("created %d suspended Stacks in %s", o.n, benchenv.Since(t0))

	c := &client{base: "https://" + ctrl.DashboardAddr, token: token,
		http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}} // the controller's self-signed certificate
	deadline := time.Now().Add(o.timeout)
	for {
		var f fleet
		if err := c.get(ctx, "/api/fleet?state=Suspended&pageSize=1", &f); err != nil {
			return err
		}
		if f.Counts["Suspended"] == o.n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s the dashboard counts %d suspended Stacks of %d", o.timeout, f.Counts["Suspended"], o.n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	e.Logf("every Stack listed by the dashboard (in its cache) %s after the first was created", benchenv.Since(t0))

	queries := []struct{ what, path string }{
		{"first page (50 rows, by name)", "/api/fleet"},
		{"page 100", fmt.Sprintf("/api/fleet?page=%d", max(1, o.n/50/2))},
		{"state filter (Failing: none)", "/api/fleet?state=Failing"},
		{"label selector (one in ten)", "/api/fleet?selector=tenth%3Dyes"},
		{"sorted by state", "/api/fleet?sort=state"},
		{"name contains", "/api/fleet?name=0042"},
	}
	fmt.Printf("\n%-32s %10s %10s %8s\n", "query over "+fmt.Sprint(o.n)+" Stacks", "median", "slowest", "bytes")
	for _, q := range queries {
		var times []time.Duration
		var size int
		for range o.samples {
			t := time.Now()
			n, err := c.raw(ctx, q.path)
			if err != nil {
				return err
			}
			times = append(times, time.Since(t))
			size = n
		}
		slices.Sort(times)
		fmt.Printf("%-32s %10s %10s %8d\n", q.what, times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), size)
	}
	if o.browser {
		if err := measurePaint(ctx, c, o.samples); err != nil {
			return fmt.Errorf("the fleet page in Chromium: %w", err)
		}
	}
	m, err := ctrl.Memory()
	if err == nil {
		fmt.Printf("\ncontroller after the queries: %s\n", m)
	}
	fmt.Println("target: the fleet page's first paint under 1 s.")
	return nil
}

// createStacks creates o.n suspended Stacks, one in ten labelled tenth=yes,
// o.workers at a time.
func createStacks(ctx context.Context, e *benchenv.Env, o options) error {
	var wg sync.WaitGroup
	errs := make(chan error, o.workers)
	next := make(chan int)
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				labels := map[string]string{"tenth": "no"}
				if i%10 == 0 {
					labels["tenth"] = "yes"
				}
				s, err := benchenv.StackSpec{Namespace: namespace, Name: fmt.Sprintf("stack-%05d", i), Labels: labels,
					URL: e.Git.URL(repo), Branch: branch, Dir: "app", Interval: 24 * time.Hour}.Stack()
				if err == nil {
					s.Spec.Suspend = true
					err = e.Client.Create(ctx, s)
				}
				if err != nil {
					errs <- fmt.Errorf("create Stack %d: %w", i, err)
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range o.n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// viewerToken is a token of a ServiceAccount that may get and list Stacks
// in every namespace: the fleet costs it one access review.
func viewerToken(ctx context.Context, e *benchenv.Env) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "viewer"}}
	if err := e.Client.Create(ctx, sa); err != nil {
		return "", err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-dashboard-viewer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"stackpilot.dev"}, Resources: []string{"stacks"}, Verbs: []string{"get", "list"}}}}
	if err := e.Client.Create(ctx, role); err != nil {
		return "", err
	}
	if err := e.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-dashboard-viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: "viewer"}}}); err != nil {
		return "", err
	}
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}
	if err := e.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("a token for the viewer: %w", err)
	}
	return tr.Status.Token, nil
}

func ptr[T any](v T) *T { return &v }

type fleet struct {
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
}

type client struct {
	base, token string
	http        *http.Client
}

func (c *client) do(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body, nil
}

func (c *client) get(ctx context.Context, path string, into any) error {
	body, err := c.do(ctx, path)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, into)
}

// signInCode is a code that signs a browser in as c's token.
func (c *client) signInCode(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/api/signin-codes", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Code string `json:"code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("a sign-in code: %d %v", resp.StatusCode, err)
	}
	return out.Code, nil
}

func (c *client) raw(ctx context.Context, path string) (int, error) {
	body, err := c.do(ctx, path)
	return len(body), err
}
