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
	source   string      // origin's URL, without credentials
	revision string      // BRANCH@sha1:COMMIT, or sha1:COMMIT on a detached HEAD
	dirty    []dirtyFile // uncommitted changes under the folder
}

// dirtyFile is one uncommitted change under the pushed folder.
type dirtyFile struct {
	repoPath string // slash-separated, from the checkout's root
	dirPath  string // slash-separated, from the pushed folder
	deleted  bool
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

// dirtyUnder lists the changed, deleted and untracked paths under dir.
func dirtyUnder(repo *git.Repository, dir string) ([]dirtyFile, error) {
	wt, err := repo.Worktree()
	if err != nil {
		return nil, nil // bare repository: nothing on disk to differ
	}
	status, err := wt.Status()
	if err != nil {
		return nil, err
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
		return nil, nil
	}
	prefix := filepath.ToSlash(rel) + "/"
	if rel == "." {
		prefix = ""
	}
	var changed []dirtyFile
	for p, s := range status {
		if s.Worktree == git.Unmodified && s.Staging == git.Unmodified {
			continue
		}
		if strings.HasPrefix(p, prefix) {
			changed = append(changed, dirtyFile{repoPath: p, dirPath: strings.TrimPrefix(p, prefix),
				deleted: s.Worktree == git.Deleted || s.Staging == git.Deleted})
		}
	}
	sort.Slice(changed, func(i, j int) bool { return changed[i].repoPath < changed[j].repoPath })
	return changed, nil
}

// dirtySummary names up to three of the changes that make the artifact
// differ from the commit: deletions, and changed files the artifact holds
// (not those .sourceignore or the ignore lists leave out). "" when none.
func dirtySummary(changes []dirtyFile, packaged []string) string {
	in := make(map[string]bool, len(packaged))
	for _, f := range packaged {
		in[f] = true
	}
	var names []string
	for _, c := range changes {
		if c.deleted || in[c.dirPath] {
			names = append(names, c.repoPath)
		}
	}
	if n := len(names); n > 3 {
		names = append(names[:3], fmt.Sprintf("and %d more", n-3))
	}
	return strings.Join(names, ", ")
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
