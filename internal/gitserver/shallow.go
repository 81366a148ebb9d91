package gitserver

import (
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// shallowObjects is what a fetch with depth gets: the commits at most depth
// deep from wants (a want is depth 1), their trees and blobs, less what
// haves reach; and the shallow boundary, the commits whose parents are left
// out, which the client records as shallow.
func shallowObjects(st storer.EncodedObjectStorer, wants []plumbing.Hash, depth int, haves []plumbing.Hash) (objs, shallows []plumbing.Hash, err error) {
	have := map[plumbing.Hash]bool{}
	if len(haves) > 0 {
		reached, err := fullObjects(st, haves, nil)
		if err != nil {
			return nil, nil, err
		}
		for _, h := range reached {
			have[h] = true
		}
	}
	seen := map[plumbing.Hash]bool{}
	add := func(h plumbing.Hash) bool {
		if seen[h] || have[h] {
			return false
		}
		seen[h] = true
		objs = append(objs, h)
		return true
	}
	level := wants
	for d := 1; d <= depth && len(level) > 0; d++ {
		var next []plumbing.Hash
		for _, h := range level {
			c, err := peelToCommit(st, h, add)
			if err != nil {
				return nil, nil, err
			}
			h = c.Hash
			if !add(h) {
				continue
			}
			if err := addTree(st, c.TreeHash, add); err != nil {
				return nil, nil, err
			}
			if d == depth && len(c.ParentHashes) > 0 {
				shallows = append(shallows, h)
				continue
			}
			next = append(next, c.ParentHashes...)
		}
		level = next
	}
	return objs, shallows, nil
}

// addTree adds a tree and everything in it, skipping subtrees already added.
func addTree(st storer.EncodedObjectStorer, h plumbing.Hash, add func(plumbing.Hash) bool) error {
	if !add(h) {
		return nil
	}
	tree, err := object.GetTree(st, h)
	if err != nil {
		return err
	}
	for _, e := range tree.Entries {
		if e.Mode.IsFile() {
			add(e.Hash)
			continue
		}
		if e.Mode == filemode.Submodule { // its commit lives in another repository
			continue
		}
		if err := addTree(st, e.Hash, add); err != nil {
			return err
		}
	}
	return nil
}

// peelToCommit returns the commit h names, adding the annotated tags on the
// way (a tag wanted at depth 1 brings its commit at depth 1).
func peelToCommit(st storer.EncodedObjectStorer, h plumbing.Hash, add func(plumbing.Hash) bool) (*object.Commit, error) {
	for range 10 {
		tag, err := object.GetTag(st, h)
		if err != nil {
			return object.GetCommit(st, h)
		}
		add(h)
		h = tag.Target
	}
	return nil, fmt.Errorf("tag %s: more than 10 tags deep", h)
}
