package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/sourceignore/gitignore"

	"github.com/stackpilot/stackpilot/internal/artifact"
)

// FileChange is one path that differs between an artifact and a folder.
type FileChange struct {
	Path   string
	Change string // "added" (in the folder only) | "removed" (in the artifact only) | "modified"
}

// Diff compares the files of the artifact (its Flux content layer) with
// dir, packaged by the same rules as Push: content, exec bit and link
// targets count, times and owners do not. Sorted by path.
func (c *Client) Diff(ctx context.Context, ref Reference, dir string, opts BuildOptions) ([]FileChange, error) {
	var local bytes.Buffer
	if _, err := BuildLayer(dir, opts, &local); err != nil {
		return nil, err
	}
	mine, err := tarIndex(&local, nil)
	if err != nil {
		return nil, err
	}
	ro := c.session(ctx)
	m, _, err := c.manifest(ref, ro)
	if err != nil {
		return nil, err
	}
	layer, err := chooseLayer(m, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	match, err := ignoreMatcher(dir, opts.IgnorePaths)
	if err != nil {
		return nil, err
	}
	var theirs map[string]string
	err = c.readLayer(ref, layer, 0, ro, func(r io.Reader) error {
		theirs, err = tarIndex(r, match)
		return err
	})
	if err != nil {
		return nil, err
	}
	return compare(theirs, mine), nil
}

func compare(old, cur map[string]string) []FileChange {
	var out []FileChange
	for p, h := range cur {
		switch oh, ok := old[p]; {
		case !ok:
			out = append(out, FileChange{Path: p, Change: "added"})
		case oh != h:
			out = append(out, FileChange{Path: p, Change: "modified"})
		}
	}
	for p := range old {
		if _, ok := cur[p]; !ok {
			out = append(out, FileChange{Path: p, Change: "removed"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// tarIndex maps each file and link of a tar(+gzip) stream to a hash of
// what it is: content and exec bit, or link target. Paths the matcher
// ignores are left out, so an artifact built with other rules compares
// fairly. Unsafe names are refused as by Untar.
func tarIndex(r io.Reader, match gitignore.Matcher) (map[string]string, error) {
	tr, err := tarStream(r)
	if err != nil {
		return nil, err
	}
	idx := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return idx, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading archive: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || h.Typeflag == tar.TypeDir || h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if path.IsAbs(name) || filepath.IsAbs(h.Name) || name == ".." || strings.HasPrefix(name, "../") {
			return nil, &artifact.UnsafePathError{Path: h.Name, Reason: "path leads outside the destination"}
		}
		if match != nil && ignored(match, name, false) {
			continue
		}
		sum := sha256.New()
		switch h.Typeflag {
		case tar.TypeReg:
			fmt.Fprintf(sum, "file %t\n", h.Mode&0o100 != 0)
			if _, err := io.Copy(sum, tr); err != nil {
				return nil, fmt.Errorf("reading %s: %w", name, err)
			}
		case tar.TypeSymlink, tar.TypeLink:
			fmt.Fprintf(sum, "link %c %s\n", h.Typeflag, h.Linkname)
		default:
			fmt.Fprintf(sum, "other %c\n", h.Typeflag)
		}
		idx[name] = hex.EncodeToString(sum.Sum(nil))
	}
}
