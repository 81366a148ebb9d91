package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// glob is a compiled Match pattern: `*` is any run of characters (`/` and
// `:` included, unlike path.Match, since type tokens are
// `package:module/path:Type`), `?` is one character, everything else is
// itself.
type glob struct {
	pattern string
	re      *regexp.Regexp
}

// maxGlobLength bounds a pattern: type tokens and names are short, and a
// long pattern is a mistake.
const maxGlobLength = 512

func compileGlob(pattern string) (glob, error) {
	if pattern == "" {
		return glob{}, fmt.Errorf("empty pattern: leave the list out to match everything")
	}
	if len(pattern) > maxGlobLength {
		return glob{}, fmt.Errorf("pattern longer than %d characters", maxGlobLength)
	}
	var b strings.Builder
	b.WriteString(`^`)
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	// Go's regexp runs in linear time: no pattern can make matching slow.
	re, err := regexp.Compile(b.String())
	if err != nil {
		return glob{}, err
	}
	return glob{pattern: pattern, re: re}, nil
}

func (g glob) match(s string) bool { return g.re.MatchString(s) }

// anyGlob is true when globs is empty or one of them matches s.
func anyGlob(globs []glob, s string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if g.match(s) {
			return true
		}
	}
	return false
}
