package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestArtifactPushGitDefaults: --source and --revision come from the
// checkout the folder is in (origin without credentials; BRANCH@sha1:COMMIT,
// sha1:COMMIT when detached), a dirty folder warns, and the flags win.
func TestArtifactPushGitDefaults(t *testing.T) {
	isolate(t)
	reg := testenv.NewRegistry(t)
	root := t.TempDir()
	repo, commit, prog := newCheckout(t, root)
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	repoURL := "oci://" + reg.Host() + "/org/infra"

	annotations := func(tag string) listedTag { return listed(t, repoURL, tag) }

	_, errOut := mustRun(t, "artifact", "push", repoURL+":branch", "--path", prog, "--insecure")
	got := annotations("branch")
	if got.Source != "https://git.example.com/org/platform.git" || got.Revision != "trunk@sha1:"+commit.String() {
		t.Errorf("on a branch: source %q revision %q", got.Source, got.Revision)
	}
	if strings.Contains(errOut, "s3cr3t") || strings.Contains(errOut, "warning") {
		t.Errorf("push said %q", errOut)
	}

	// A subfolder of the program (DetectDotGit looks upwards), detached.
	if err := wt.Checkout(&git.CheckoutOptions{Hash: commit}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "artifact", "push", repoURL+":detached", "--path", filepath.Join(prog, "lib"), "--insecure")
	if got := annotations("detached"); got.Revision != "sha1:"+commit.String() {
		t.Errorf("detached: revision %q", got.Revision)
	}

	// A change the artifact does not hold (.sourceignore leaves *.tmp
	// out): no warning.
	if err := os.WriteFile(filepath.Join(prog, "scratch.tmp"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut := mustRun(t, "artifact", "push", repoURL+":ignored", "--path", prog, "--insecure"); strings.Contains(errOut, "warning") {
		t.Errorf("a change to an ignored file warned: %q", errOut)
	}

	// Uncommitted changes under the folder: a warning naming them.
	if err := os.WriteFile(filepath.Join(prog, "Pulumi.yaml"), []byte("name: changed\nruntime: yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut = mustRun(t, "artifact", "push", repoURL+":dirty", "--path", prog, "--insecure")
	if !strings.Contains(errOut, "uncommitted changes (programs/infra/Pulumi.yaml)") {
		t.Errorf("a dirty folder: stderr %q", errOut)
	}
	if err := os.Remove(filepath.Join(prog, "docs", "README.md")); err != nil {
		t.Fatal(err)
	}
	_, errOut = mustRun(t, "artifact", "push", repoURL+":deleted", "--path", prog, "--insecure")
	if !strings.Contains(errOut, "uncommitted changes (programs/infra/Pulumi.yaml, programs/infra/docs/README.md)") {
		t.Errorf("a deleted file: stderr %q", errOut)
	}

	// The flags win, even when empty.
	mustRun(t, "artifact", "push", repoURL+":flags", "--path", prog, "--insecure", "--source", "", "--revision", "v9@sha1:abc")
	if got := annotations("flags"); got.Source != "" || got.Revision != "v9@sha1:abc" {
		t.Errorf("with flags: %+v", got)
	}

	// Outside any checkout: no annotations.
	plain := writeProgram(t, t.TempDir())
	mustRun(t, "artifact", "push", repoURL+":plain", "--path", plain, "--insecure")
	if got := annotations("plain"); got.Source != "" || got.Revision != "" {
		t.Errorf("outside Git: %+v", got)
	}
}

// newCheckout makes a Git repository in root on branch trunk, with an
// origin remote whose URL holds credentials, and a program committed in
// programs/infra.
func newCheckout(t *testing.T, root string) (*git.Repository, plumbing.Hash, string) {
	t.Helper()
	repo, err := git.PlainInitWithOptions(root, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("trunk")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{"https://deploy:s3cr3t-token@git.example.com/org/platform.git"}}); err != nil {
		t.Fatal(err)
	}
	prog := writeProgram(t, filepath.Join(root, "programs", "infra"))
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	commit, err := wt.Commit("infra", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return repo, commit, prog
}

// listed is tag's row of `artifact list -o json`.
func listed(t *testing.T, repoURL, tag string) listedTag {
	t.Helper()
	js, _ := mustRun(t, "artifact", "list", repoURL, "--insecure", "-o", "json")
	var rows []listedTag
	if err := json.Unmarshal([]byte(js), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Tag == tag {
			return r
		}
	}
	t.Fatalf("no tag %s in %s", tag, js)
	return listedTag{}
}

// TestArtifactPushGitLinkedWorktree: a folder in a linked worktree (`git
// worktree add`, whose .git is a file pointing into the main checkout)
// gets the worktree's branch and commit, and the shared origin.
func TestArtifactPushGitLinkedWorktree(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git to make a linked worktree with")
	}
	isolate(t)
	reg := testenv.NewRegistry(t)
	main := filepath.Join(t.TempDir(), "main")
	_, commit, _ := newCheckout(t, main)
	linked := filepath.Join(t.TempDir(), "linked")
	cmd := exec.Command(gitBin, "-C", main, "worktree", "add", "-q", "-b", "feature", linked)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v\n%s", err, out)
	}
	repoURL := "oci://" + reg.Host() + "/org/infra"
	_, errOut := mustRun(t, "artifact", "push", repoURL+":linked", "--path", filepath.Join(linked, "programs", "infra"), "--insecure")
	got := listed(t, repoURL, "linked")
	if got.Source != "https://git.example.com/org/platform.git" || got.Revision != "feature@sha1:"+commit.String() {
		t.Errorf("in a linked worktree: source %q revision %q", got.Source, got.Revision)
	}
	if strings.Contains(errOut, "warning") {
		t.Errorf("a clean linked worktree warned: %q", errOut)
	}
}

func TestStripCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:tok@github.com/org/repo.git": "https://github.com/org/repo.git",
		"https://tok@github.com/org/repo.git":      "https://github.com/org/repo.git",
		"ssh://git:pw@github.com/org/repo.git":     "ssh://git@github.com/org/repo.git",
		"git@github.com:org/repo.git":              "git@github.com:org/repo.git",
		"https://github.com/org/repo":              "https://github.com/org/repo",
	} {
		if got := stripCredentials(in); got != want {
			t.Errorf("stripCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}
