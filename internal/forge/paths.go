package forge

import (
	"path"
	"strings"
)

// Touches reports whether any of files (paths from the repository's root)
// is one of the program's paths: under dir (spec.source.dir; "" or "." is
// the whole repository) or under or equal to one of include
// (spec.source.git.include). This is the monorepo rule of a new commit,
// applied to a pull request's changed files.
func Touches(files []string, dir string, include []string) bool {
	roots := []string{clean(dir)}
	for _, p := range include {
		roots = append(roots, clean(p))
	}
	for _, f := range files {
		f = clean(f)
		for _, r := range roots {
			if r == "" || f == r || strings.HasPrefix(f, r+"/") {
				return true
			}
		}
	}
	return false
}

// clean is p relative to the root, without "./", a leading or trailing
// slash; "" for the root itself.
func clean(p string) string {
	p = path.Clean("/" + strings.TrimSpace(p))
	return strings.TrimPrefix(p, "/")
}
