package opchannel

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/runner"
)

// The controller's side of the dependency cache, through the real TLS
// channel: keys, namespaces, bounds.

const (
	keyA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	keyB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	keyC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// depsChannel is a channel whose Server keeps a dependency cache in a
// temporary folder, bounded to max bytes per namespace (0: the default).
func depsChannel(t *testing.T, max int64) (*channel, string) {
	t.Helper()
	c := newChannel(t, nil)
	dir := filepath.Join(t.TempDir(), "deps")
	if err := c.srv.UseDependencyCache(DepCache{Dir: dir, MaxNamespaceBytes: max}); err != nil {
		t.Fatal(err)
	}
	return c, dir
}

// registerStack registers an operation of the Stack ns/name and returns
// its credential.
func registerStack(t *testing.T, c *channel, id, stack string) string {
	t.Helper()
	tree, digest := makeTree(t, map[string]string{"Pulumi.yaml": "name: x\nruntime: yaml\n"})
	op := newOp(t, id, tree, digest, runner.Spec{WorkDir: ".", StackName: "dev", Backend: "file:///nowhere"})
	op.Stack = stack
	cred, err := c.srv.Register(op)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.srv.Unregister(id) })
	return cred
}

// gz is a gzip stream of n random bytes (incompressible: its size is n and
// a little).
func gz(t *testing.T, n int) []byte {
	t.Helper()
	raw := make([]byte, n)
	_, _ = rand.Read(raw)
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write(raw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDepCacheKeysAndNamespaces(t *testing.T) {
	c, dir := depsChannel(t, 0)
	team := registerStack(t, c, "op-team", "team/app")
	other := registerStack(t, c, "op-other", "other/app")
	entry := gz(t, 1000)

	if code, text := c.call(http.MethodGet, "op-team", "deps/"+keyA, team, nil); code != http.StatusNotFound {
		t.Fatalf("GET of a key never stored: %d %s", code, text)
	}
	if code, text := c.call(http.MethodPut, "op-team", "deps/"+keyA, team, entry); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, text)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "team", keyA+".tar.gz")); err != nil || !bytes.Equal(b, entry) {
		t.Fatalf("the entry is not under its namespace's folder: %v", err)
	}
	if code, text := c.call(http.MethodGet, "op-team", "deps/"+keyA, team, nil); code != http.StatusOK || text != string(entry) {
		t.Fatalf("GET of the stored key: %d (%d bytes)", code, len(text))
	}

	// Another namespace's Pod, with its own valid credential, finds nothing
	// of team's, and what it sends stays its own.
	if code, text := c.call(http.MethodGet, "op-other", "deps/"+keyA, other, nil); code != http.StatusNotFound {
		t.Fatalf("another namespace read team's entry: %d (%d bytes)", code, len(text))
	}
	if code, text := c.call(http.MethodPut, "op-other", "deps/"+keyA, other, gz(t, 10)); code != http.StatusOK {
		t.Fatalf("PUT of another namespace: %d %s", code, text)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "team", keyA+".tar.gz")); !bytes.Equal(b, entry) {
		t.Fatal("another namespace's PUT changed team's entry")
	}
	// Another operation's path with this credential: the channel's 403.
	if code, _ := c.call(http.MethodGet, "op-team", "deps/"+keyA, other, nil); code != http.StatusForbidden {
		t.Fatalf("op-other's credential on op-team's path: %d, want 403", code)
	}
	if code, _ := c.call(http.MethodPut, "op-team", "deps/"+keyA, "", entry); code != http.StatusForbidden {
		t.Fatalf("no credential: %d, want 403", code)
	}

	// Keys that are not a lowercase hex SHA-256 make no path.
	for _, key := range []string{
		strings.ToUpper(keyA), keyA[:63], keyA + "a", "..%2F..%2Fteam%2F" + keyA[:56],
		"..%2Fother%2F" + keyA, "%2E%2E", strings.Repeat("g", 64),
	} {
		for _, m := range []string{http.MethodGet, http.MethodPut} {
			code, text := c.call(m, "op-other", "deps/"+key, other, entry)
			if code != http.StatusBadRequest && code != http.StatusForbidden && code != http.StatusNotFound {
				t.Errorf("%s deps/%s: %d %s", m, key, code, text)
			}
			if code == http.StatusOK {
				t.Errorf("%s deps/%s was served", m, key)
			}
		}
	}
	if code, _ := c.call(http.MethodGet, "op-team", "deps/"+strings.ToUpper(keyA), team, nil); code != http.StatusBadRequest {
		t.Errorf("an upper-case key: %d, want 400", code)
	}
	// What the cache folder holds is only the two namespaces' entries.
	var files []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	if strings.Join(files, " ") != "other/"+keyA+".tar.gz team/"+keyA+".tar.gz" {
		t.Errorf("the cache holds %v", files)
	}

	// Not a gzip stream: refused.
	if code, text := c.call(http.MethodPut, "op-team", "deps/"+keyB, team, []byte("plain text")); code != http.StatusBadRequest {
		t.Errorf("a PUT of plain text: %d %s", code, text)
	}
}

func TestDepCacheOperationOfABadNamespace(t *testing.T) {
	c, _ := depsChannel(t, 0)
	cred := registerStack(t, c, "op-bad", "../etc/app")
	if code, text := c.call(http.MethodPut, "op-bad", "deps/"+keyA, cred, gz(t, 10)); code != http.StatusForbidden {
		t.Fatalf("an operation whose namespace is not a DNS label: %d %s", code, text)
	}
}

func TestDepCacheDisabled(t *testing.T) {
	c := newChannel(t, nil)
	cred := registerStack(t, c, "op", "team/app")
	for _, m := range []string{http.MethodGet, http.MethodPut} {
		if code, _ := c.call(m, "op", "deps/"+keyA, cred, gz(t, 10)); code != http.StatusNotFound {
			t.Errorf("%s without a cache: %d, want 404", m, code)
		}
	}
}

// A namespace keeps at most its bound: the entries used longest ago go
// first, a GET counting as a use; one entry past the bound is refused.
func TestDepCacheBound(t *testing.T) {
	c, dir := depsChannel(t, 2500)
	cred := registerStack(t, c, "op", "team/app")
	put := func(key string) {
		t.Helper()
		if code, text := c.call(http.MethodPut, "op", "deps/"+key, cred, gz(t, 1000)); code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", key[:1], code, text)
		}
	}
	// The times are set, not waited for: A is older than B.
	age := func(key string, ago time.Duration) {
		t.Helper()
		at := time.Now().Add(-ago)
		if err := os.Chtimes(filepath.Join(dir, "team", key+".tar.gz"), at, at); err != nil {
			t.Fatal(err)
		}
	}
	put(keyA)
	age(keyA, 2*time.Hour)
	put(keyB)
	age(keyB, time.Hour)
	// A is used: B is now the one used longest ago.
	if code, _ := c.call(http.MethodGet, "op", "deps/"+keyA, cred, nil); code != http.StatusOK {
		t.Fatal("GET A")
	}
	put(keyC) // three entries of ~1 KB do not fit in 2500 bytes
	for key, want := range map[string]bool{keyA: true, keyB: false, keyC: true} {
		_, err := os.Stat(filepath.Join(dir, "team", key+".tar.gz"))
		if (err == nil) != want {
			t.Errorf("entry %s kept = %v, want %v", key[:1], err == nil, want)
		}
	}
	if code, text := c.call(http.MethodPut, "op", "deps/"+keyB, cred, gz(t, 3000)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("an entry larger than the namespace's bound: %d %s", code, text)
	}
	if _, err := os.Stat(filepath.Join(dir, "team", keyB+".tar.gz")); err == nil {
		t.Error("the refused entry was kept")
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "team", ".upload-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// The whole cache is bounded too: past it, the entries used longest ago go
// first, whichever namespace they are of, never the one just written.
func TestDepCacheTotalBound(t *testing.T) {
	c := newChannel(t, nil)
	dir := filepath.Join(t.TempDir(), "deps")
	if err := c.srv.UseDependencyCache(DepCache{Dir: dir, MaxBytes: 2500}); err != nil {
		t.Fatal(err)
	}
	team := registerStack(t, c, "op-team", "team/app")
	other := registerStack(t, c, "op-other", "other/app")
	put := func(id, cred, key string) {
		t.Helper()
		if code, text := c.call(http.MethodPut, id, "deps/"+key, cred, gz(t, 1000)); code != http.StatusOK {
			t.Fatalf("PUT: %d %s", code, text)
		}
	}
	age := func(ns, key string, ago time.Duration) {
		t.Helper()
		at := time.Now().Add(-ago)
		if err := os.Chtimes(filepath.Join(dir, ns, key+".tar.gz"), at, at); err != nil {
			t.Fatal(err)
		}
	}
	put("op-team", team, keyA)
	age("team", keyA, time.Hour)
	put("op-other", other, keyB)
	age("other", keyB, 2*time.Hour)
	put("op-team", team, keyC)
	for _, e := range []struct {
		ns, key string
		want    bool
	}{{"team", keyA, true}, {"other", keyB, false}, {"team", keyC, true}} {
		_, err := os.Stat(filepath.Join(dir, e.ns, e.key+".tar.gz"))
		if (err == nil) != e.want {
			t.Errorf("entry %s/%s kept = %v, want %v", e.ns, e.key[:1], err == nil, e.want)
		}
	}
}
