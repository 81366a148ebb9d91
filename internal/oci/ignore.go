package oci

import (
	"strings"

	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/sourceignore/gitignore"
)

// DefaultIgnorePaths are the paths `flux push artifact` leaves out by
// default (its --ignore-paths default: Flux's VCS and extension lists).
var DefaultIgnorePaths = append(strings.Split(sourceignore.ExcludeVCS, ","), strings.Split(sourceignore.ExcludeExt, ",")...)

// ignoreMatcher is Flux's default list, then the .sourceignore files of the
// tree (each scoped to its directory), then the caller's paths: later
// patterns win, so a .sourceignore can re-include with "!".
func ignoreMatcher(dir string, extra []string) (gitignore.Matcher, error) {
	var ps []gitignore.Pattern
	for _, p := range DefaultIgnorePaths {
		ps = append(ps, gitignore.ParsePattern(p, nil))
	}
	files, err := sourceignore.LoadIgnorePatterns(dir, nil)
	if err != nil {
		return nil, err
	}
	ps = append(ps, files...)
	ps = append(ps, sourceignore.ReadPatterns(strings.NewReader(strings.Join(extra, "\n")), nil)...)
	return sourceignore.NewMatcher(ps), nil
}

// ignored reports whether the slash-separated relative path is left out.
func ignored(m gitignore.Matcher, rel string, isDir bool) bool {
	return m.Match(strings.Split(rel, "/"), isDir)
}
