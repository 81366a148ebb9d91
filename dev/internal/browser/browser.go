// Package browser drives a real headless Chromium (Debian's chromium, which
// `make system-packages` installs) from tests, through the DevTools protocol
// (chromedp): the dashboard's pages are checked as a user's browser runs
// them, scripts, cookies, server-sent events and all.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// ChromiumEnv names a browser binary to use instead of the one on PATH.
const ChromiumEnv = "STACKPILOT_CHROMIUM"

// ArtifactsEnv names the directory screenshots are written to; by default
// tmp/artifacts/browser under the repository root (ignored by Git).
const ArtifactsEnv = "STACKPILOT_ARTIFACTS"

// StepTimeout bounds one step of a test in the page (a navigation, a wait
// for an element): generous, because a loaded machine renders slowly, and
// a step that waits on the controller has its own, longer bound.
const StepTimeout = 2 * time.Minute

// Browser is one Chromium process for one test; each User is a browser
// context of its own in it (its own cookies, as another person's browser).
type Browser struct {
	root      context.Context
	artifacts string
}

// Start runs Chromium headless for t, and stops it when t ends. It skips
// under -short and fails, saying how to install it, when there is none.
func Start(t testing.TB) *Browser {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a real Chromium: not with -short")
	}
	path, err := Chromium()
	if err != nil {
		t.Fatal(err)
	}
	opts := AllocatorOptions(path, t.TempDir())
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelRoot(); cancelAlloc() })
	// The first Do starts the process, which lives as long as the context
	// of that call: it gets no timeout of its own.
	if err := chromedp.Do(root); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return &Browser{root: root, artifacts: artifactsDir(t)}
}

// AllocatorOptions run the browser at path headless, with its profile in
// dir, as the tests and benchmarks need it.
func AllocatorOptions(path, dir string) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
		// Tests run as root in a container: Chromium's sandbox needs
		// user namespaces it may not have there.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		// The controller's listener has a self-signed certificate.
		chromedp.Flag("ignore-certificate-errors", true),
		// Nothing of the page may come from the network but loopback.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"),
	)
}

// Chromium finds the browser: $STACKPILOT_CHROMIUM, else chromium (Debian's
// name) or chromium-browser on PATH.
func Chromium() (string, error) {
	if p := os.Getenv(ChromiumEnv); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH: run `make system-packages` (Debian's chromium), or name a browser with $" + ChromiumEnv)
}

// artifactsDir is where t's screenshots go: one directory per test.
func artifactsDir(t testing.TB) string {
	base := os.Getenv(ArtifactsEnv)
	if base == "" {
		root, err := testenv.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		base = filepath.Join(root, "tmp", "artifacts", "browser")
	}
	dir := filepath.Join(base, unsafeInName.ReplaceAllString(t.Name(), "_"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Page is one tab of one user.
type Page struct {
	t    testing.TB
	b    *Browser
	ctx  context.Context
	name string

	mu sync.Mutex
	// problems are the page's uncaught exceptions and console errors, which
	// a test fails on: a script that throws shows a user a page that does
	// not work.
	problems []string
}

// User opens a tab in a browser context of its own: name is who it is, for
// messages and the screenshots' names.
func (b *Browser) User(t testing.TB, name string) *Page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	p := &Page{t: t, b: b, ctx: ctx, name: name}
	// The first Do opens the tab, for as long as the context of that call.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab for %s: %v", name, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			p.note(m)
		}
	}()
	return p
}

// note keeps the console messages that mean the page is broken: uncaught
// exceptions, the page's own console.error, and what the browser reports
// of its security rules (a Content-Security-Policy that blocked
// something). Failed requests are not kept: a 401 before signing in or a
// 403 for another namespace are answers a test expects.
func (p *Page) note(m chromedp.ConsoleMessage) {
	switch {
	case m.IsException():
	case m.Type == chromedp.ConsoleError && m.Source == "":
	case m.Source == "security":
	default:
		return
	}
	p.problem(fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
}

func (p *Page) problem(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = append(p.problems, s)
}

// Problems are the exceptions and console errors seen so far.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// Run runs actions in the tab within timeout (StepTimeout when 0).
func (p *Page) Run(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	if timeout == 0 {
		timeout = StepTimeout
	}
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Must runs actions, failing the test with what says where it stopped.
func (p *Page) Must(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := p.Run(0, actions...); err != nil {
		p.t.Fatalf("%s (%s): %v; problems in the page: %v", what, p.name, err, p.Problems())
	}
}

// Open navigates to url and waits for the page's body.
func (p *Page) Open(url string) {
	p.t.Helper()
	p.Must("opening "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body")))
}

// Go moves the page to the address fragment hash (#/graph, ...), as a
// click on a link does: Navigate would wait for a load that a fragment
// never fires.
func (p *Page) Go(hash string) {
	p.t.Helper()
	value(p, "going to "+hash, chromedp.Evaluate[string](fmt.Sprintf(`location.hash = %q`, hash)))
}

// value runs a that answers a value, failing the test on an error.
func value[T any](p *Page, what string, a chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, StepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		p.t.Fatalf("%s (%s): %v; problems in the page: %v", what, p.name, err, p.Problems())
	}
	return v
}

// Text is the text of the first element matching the CSS selector sel ("" when
// none).
func (p *Page) Text(sel string) string {
	p.t.Helper()
	return value(p, "reading "+sel, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
}

// Eval evaluates a JavaScript expression to a value of type T.
func Eval[T any](p *Page, expr string) T {
	p.t.Helper()
	return value(p, "evaluating "+expr, chromedp.Evaluate[T](expr))
}

// HTML is the document as it stands: every element, attribute and text.
func (p *Page) HTML() string {
	p.t.Helper()
	return value(p, "reading the document", chromedp.OuterHTML(chromedp.CSS("html")))
}

// WaitFor polls expr (a JavaScript expression) until it is true, within
// timeout; on timeout the test fails with what (and a screenshot, to see
// why).
func (p *Page) WaitFor(what, expr string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`Boolean(`+expr+`)`))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			shot := p.screenshotFile("timeout-" + what)
			p.t.Fatalf("%s (%s): not within %s (last error %v); screenshot %s; problems in the page: %v",
				what, p.name, timeout, err, shot, p.Problems())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Screenshot writes the whole page as <artifacts>/<name>.png and fails the
// test when it is blank (one colour, or next to nothing drawn).
func (p *Page) Screenshot(name string) string {
	p.t.Helper()
	png := value(p, "screenshot "+name, chromedp.FullScreenshot(100))
	path := p.artifact(name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := CheckNotBlank(png); err != nil {
		p.t.Fatalf("screenshot %s: %v", path, err)
	}
	return path
}

// unsafeInName is what a file name of an artifact may not hold.
var unsafeInName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// artifact is the path of the screenshot name of this user.
func (p *Page) artifact(name string) string {
	return filepath.Join(p.b.artifacts, unsafeInName.ReplaceAllString(p.name+"-"+name, "_")+".png")
}

// screenshotFile is Screenshot for a test that is failing anyway: no check,
// no fatal error.
func (p *Page) screenshotFile(name string) string {
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return "(none: " + err.Error() + ")"
	}
	path := p.artifact(name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return "(none: " + err.Error() + ")"
	}
	return path
}
