package gitserver

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func start(t *testing.T) *Server {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "repos"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func commit(t *testing.T, s *Server, repo, branch string, files map[string]string) string {
	t.Helper()
	h, err := s.Commit(repo, branch, files, "commit")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A depth-1 clone gets the tip only: the client records it as shallow and
// its parent is not in the clone.
func TestShallowClone(t *testing.T) {
	s := start(t)
	c1 := commit(t, s, "app", "main", map[string]string{"v": "1", "dir/a": "a"})
	c2 := commit(t, s, "app", "main", map[string]string{"v": "2", "dir/a": "a"})
	if err := s.Tag("app", "v2", c2); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []plumbing.ReferenceName{"refs/heads/main", "refs/tags/v2"} {
		dir := t.TempDir()
		r, err := gogit.PlainClone(dir, false, &gogit.CloneOptions{URL: s.RepoURL("app"), Depth: 1, ReferenceName: ref, SingleBranch: true})
		if err != nil {
			t.Fatalf("clone %s: %v", ref, err)
		}
		if _, err := r.CommitObject(plumbing.NewHash(c2)); err != nil {
			t.Errorf("clone %s: tip missing: %v", ref, err)
		}
		if _, err := r.CommitObject(plumbing.NewHash(c1)); err == nil {
			t.Errorf("clone %s: a depth-1 clone has the parent commit", ref)
		}
		shallow, _ := r.Storer.Shallow()
		if len(shallow) != 1 || shallow[0].String() != c2 {
			t.Errorf("clone %s: shallow = %v, want [%s]", ref, shallow, c2)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "dir", "a")); string(b) != "a" {
			t.Errorf("clone %s: dir/a = %q", ref, b)
		}
	}
	// A full clone has the history.
	r, err := gogit.PlainClone(t.TempDir(), true, &gogit.CloneOptions{URL: s.RepoURL("app")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CommitObject(plumbing.NewHash(c1)); err != nil {
		t.Errorf("full clone lacks the first commit: %v", err)
	}
}

// The demo tells users to `git clone`, change the program and `git push`:
// the git CLI must be able to do both.
func TestGitCLICloneAndPush(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH")
	}
	s := start(t)
	c1 := commit(t, s, "platform", "main", map[string]string{"prog/Pulumi.yaml": "name: prog\n"})
	dir := filepath.Join(t.TempDir(), "platform")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = filepath.Dir(dir)
		if _, err := os.Stat(dir); err == nil {
			cmd.Dir = dir
		}
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(),
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("clone", s.RepoURL("platform"), dir)
	if got := git("rev-parse", "HEAD"); got != c1 {
		t.Fatalf("cloned HEAD %s, want %s", got, c1)
	}
	if err := os.WriteFile(filepath.Join(dir, "prog", "Pulumi.yaml"), []byte("name: prog\n# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-qam", "change")
	c2 := git("rev-parse", "HEAD")
	git("push", "-q", "origin", "main")

	r, err := gogit.PlainOpen(filepath.Join(s.Root(), "platform.git"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil || ref.Hash().String() != c2 {
		t.Fatalf("main after the push: %v %v, want %s", ref, err, c2)
	}
	c, err := r.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.File("prog/Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Contents(); got != "name: prog\n# changed\n" {
		t.Errorf("pushed content %q", got)
	}
	// And Commit builds on what was pushed, and a pull (a fetch with haves)
	// brings it back.
	c3 := commit(t, s, "platform", "main", map[string]string{"x": "x"})
	c3obj, _ := r.CommitObject(plumbing.NewHash(c3))
	if c3obj == nil || len(c3obj.ParentHashes) != 1 || c3obj.ParentHashes[0] != ref.Hash() {
		t.Errorf("Commit after a push: parents %v, want [%s]", parents(c3obj), c2)
	}
	git("pull", "-q", "--ff-only")
	if got := git("rev-parse", "HEAD"); got != c3 {
		t.Errorf("HEAD after git pull: %s, want %s", got, c3)
	}
	// Many local commits: git negotiates in rounds before it says "done".
	for i := range 40 {
		if err := os.WriteFile(filepath.Join(dir, "n"), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "n")
		git("commit", "-qm", "local")
	}
	c4 := commit(t, s, "platform", "other", map[string]string{"o": "o"})
	git("fetch", "-q", "origin", "other")
	if got := git("rev-parse", "FETCH_HEAD"); got != c4 {
		t.Errorf("FETCH_HEAD %s, want %s", got, c4)
	}
}

func parents(c *object.Commit) []plumbing.Hash {
	if c == nil {
		return nil
	}
	return c.ParentHashes
}

func TestRefusesOtherRequests(t *testing.T) {
	s := start(t)
	commit(t, s, "app", "main", map[string]string{"a": "a"})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/app.git/info/refs", http.StatusNotFound}, // dumb HTTP
		{"GET", "/missing.git/info/refs?service=git-upload-pack", http.StatusNotFound},
		{"GET", "/../app.git/info/refs?service=git-upload-pack", http.StatusNotFound},
		{"POST", "/app.git/git-upload-pack", http.StatusBadRequest}, // empty body
		{"GET", "/app.git/info/refs?service=git-upload-pack", http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, s.URL()+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.code)
		}
	}
	if _, err := s.Commit("../escape", "main", map[string]string{"a": "a"}, "x"); err == nil {
		t.Error("Commit to ../escape: no error")
	}
}
