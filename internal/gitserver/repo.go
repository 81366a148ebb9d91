package gitserver

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Author signs the commits and tags the server writes.
var Author = object.Signature{Name: "Stackpilot", Email: "gitserver@stackpilot.dev"}

// The writes below go to the repositories on disk directly rather than
// over the network, so that a test's count of requests is only what the
// code under test did.

// open opens repository name, creating it with HEAD at branch when it does
// not exist yet and branch is not empty.
func (s *Server) open(name, branch string) (*gogit.Repository, error) {
	dir, err := s.dir(name)
	if err != nil {
		return nil, err
	}
	r, err := gogit.PlainOpen(dir)
	if err == nil {
		return r, nil
	}
	if branch == "" {
		return nil, fmt.Errorf("gitserver: repository %q does not exist", name)
	}
	r, err = gogit.PlainInitWithOptions(dir, &gogit.PlainInitOptions{
		Bare:        true,
		InitOptions: gogit.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
	})
	if err != nil {
		return nil, fmt.Errorf("gitserver: create %q: %w", name, err)
	}
	return r, nil
}

// Commit adds a commit to branch of repo whose tree is exactly files (path
// -> content, "/"-separated paths, mode 0644) and returns its hash. The
// repository is created on first use, with HEAD pointing at branch; a new
// branch starts from no parent. Each commit states the whole tree: a file
// left out is deleted.
func (s *Server) Commit(repo, branch string, files map[string]string, message string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.open(repo, branch)
	if err != nil {
		return "", err
	}
	st := r.Storer
	tree, err := writeTree(st, files)
	if err != nil {
		return "", fmt.Errorf("gitserver: write tree: %w", err)
	}
	refName := plumbing.NewBranchReferenceName(branch)
	var parents []plumbing.Hash
	if ref, err := st.Reference(refName); err == nil {
		parents = append(parents, ref.Hash())
	}
	sig := Author
	sig.When = time.Now()
	hash, err := storeObject(st, &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: tree, ParentHashes: parents})
	if err != nil {
		return "", fmt.Errorf("gitserver: write commit: %w", err)
	}
	if err := st.SetReference(plumbing.NewHashReference(refName, hash)); err != nil {
		return "", fmt.Errorf("gitserver: update %s: %w", refName, err)
	}
	return hash.String(), nil
}

// Tag creates (or moves) the annotated tag in repo pointing at commit.
func (s *Server) Tag(repo, tag, commit string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.open(repo, "")
	if err != nil {
		return err
	}
	sig := Author
	sig.When = time.Now()
	hash, err := storeObject(r.Storer, &object.Tag{
		Name:       tag,
		Tagger:     sig,
		Message:    "release " + tag + "\n",
		TargetType: plumbing.CommitObject,
		Target:     plumbing.NewHash(commit),
	})
	if err != nil {
		return fmt.Errorf("gitserver: write tag: %w", err)
	}
	return r.Storer.SetReference(plumbing.NewHashReference(plumbing.NewTagReferenceName(tag), hash))
}

// LightweightTag creates (or moves) a tag that points at commit directly.
func (s *Server) LightweightTag(repo, tag, commit string) error {
	return s.setRef(repo, plumbing.NewHashReference(plumbing.NewTagReferenceName(tag), plumbing.NewHash(commit)))
}

// SetHEAD points repo's HEAD (its default branch) at branch.
func (s *Server) SetHEAD(repo, branch string) error {
	return s.setRef(repo, plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(branch)))
}

func (s *Server) setRef(repo string, ref *plumbing.Reference) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.open(repo, "")
	if err != nil {
		return err
	}
	return r.Storer.SetReference(ref)
}

// DeleteBranch removes branch from repo; its commits become unreachable
// unless another reference leads to them.
func (s *Server) DeleteBranch(repo, branch string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.open(repo, "")
	if err != nil {
		return err
	}
	return r.Storer.RemoveReference(plumbing.NewBranchReferenceName(branch))
}

// Delete removes repo; requests for it then get 404.
func (s *Server) Delete(repo string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := s.dir(repo)
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// writeTree stores blobs and trees for files and returns the root tree.
func writeTree(st storer.EncodedObjectStorer, files map[string]string) (plumbing.Hash, error) {
	blobs := map[string]string{}
	subdirs := map[string]map[string]string{}
	for p, content := range files {
		dir, rest, nested := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		if dir == "" || dir == "." || dir == ".." {
			return plumbing.ZeroHash, fmt.Errorf("bad path %q", p)
		}
		if !nested {
			blobs[dir] = content
			continue
		}
		if subdirs[dir] == nil {
			subdirs[dir] = map[string]string{}
		}
		subdirs[dir][rest] = content
	}
	var entries []object.TreeEntry
	for name, content := range blobs {
		obj := st.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write([]byte(content)); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
	}
	for name, sub := range subdirs {
		if _, clash := blobs[name]; clash {
			return plumbing.ZeroHash, fmt.Errorf("%q is both a file and a directory", name)
		}
		h, err := writeTree(st, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	// Git orders tree entries by name, comparing a directory as if its
	// name ended in "/"; other orders make trees git fsck rejects.
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	return storeObject(st, &object.Tree{Entries: entries})
}

type encodable interface {
	Encode(plumbing.EncodedObject) error
}

func storeObject(st storer.EncodedObjectStorer, o encodable) (plumbing.Hash, error) {
	obj := st.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return st.SetEncodedObject(obj)
}

// SetRef points the full reference name ref (refs/pull/1/head, say) of repo
// at commit, as a forge keeps each pull request's head in the base
// repository.
func (s *Server) SetRef(repo, ref, commit string) error {
	return s.setRef(repo, plumbing.NewHashReference(plumbing.ReferenceName(ref), plumbing.NewHash(commit)))
}
