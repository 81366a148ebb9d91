package inputs

import (
	"net/url"
	"strings"
)

// redactURL drops credentials from a URL before it is shown anywhere.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// Scrub replaces every secret value found in s, longest first so that a secret
// that contains another is removed whole.
func Scrub(s string, secrets []string) string {
	for _, v := range longestFirst(secrets) {
		if len(v) >= 3 { // shorter values would mangle ordinary text without protecting anything
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

func longestFirst(in []string) []string {
	out := append([]string(nil), in...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
