package main

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
)

// gitOrigin is what push takes from the Git checkout a folder is in.
type gitOrigin struct {
	source   string // origin's URL, without credentials
	revision string // BRANCH@sha1:COMMIT, or sha1:COMMIT on a detached HEAD
	dirty    string // a few of the changed paths under the folder; "" when clean
}

// gitDefaults reads dir's checkout, if any (a zero gitOrigin when dir is in
// none, or the repository has no commit yet).
func gitDefaults(dir string) (gitOrigin, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return gitOrigin{}, err
	}
	// EnableDotGitCommonDir: a linked worktree (`git worktree add`) keeps
	// its refs and objects in the main checkout's .git.
	repo, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return gitOrigin{}, nil
	}
	if err != nil {
		return gitOrigin{}, fmt.Errorf("reading the Git checkout of %s for the default --source/--revision: %w; set them yourself", dir, err)
	}
	var g gitOrigin
	if r, err := repo.Remote("origin"); err == nil && len(r.Config().URLs) > 0 {
		g.source = stripCredentials(r.Config().URLs[0])
	}
	head, err := repo.Head()
	if err != nil {
		return g, nil // no commit yet
	}
	g.revision = "sha1:" + head.Hash().String()
	if head.Name().IsBranch() {
		g.revision = head.Name().Short() + "@" + g.revision
	}
	g.dirty, err = dirtyUnder(repo, abs)
	if err != nil {
		return gitOrigin{}, fmt.Errorf("reading the Git status of %s: %w; set --revision yourself", dir, err)
	}
	return g, nil
}

// dirtyUnder lists up to three changed or untracked paths under dir.
func dirtyUnder(repo *git.Repository, dir string) (string, error) {
	wt, err := repo.Worktree()
	if err != nil {
		return "", nil // bare repository: nothing on disk to differ
	}
	status, err := wt.Status()
	if err != nil {
		return "", err
	}
	root := wt.Filesystem.Root()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return "", nil
	}
	prefix := filepath.ToSlash(rel) + "/"
	if rel == "." {
		prefix = ""
	}
	var changed []string
	for p, s := range status {
		if s.Worktree == git.Unmodified && s.Staging == git.Unmodified {
			continue
		}
		if strings.HasPrefix(p, prefix) {
			changed = append(changed, p)
		}
	}
	sort.Strings(changed)
	if n := len(changed); n > 3 {
		changed = append(changed[:3], fmt.Sprintf("and %d more", n-3))
	}
	return strings.Join(changed, ", "), nil
}

// stripCredentials drops the password (and, for HTTP URLs, the user name,
// often a token) from a remote URL: the annotation is public.
func stripCredentials(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil || u.Scheme == "" {
		return raw // scp-like "git@host:org/repo" has no password
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		u.User = nil
	} else {
		u.User = url.User(u.User.Username())
	}
	return u.String()
}
