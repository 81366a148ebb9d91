package source

import (
	"net/url"
	"strings"
)

// RedactURL returns u without userinfo, so it can go into messages, events
// and status. Inputs that do not parse as URLs (scp-like "git@host:path")
// carry no password and are returned as they are, except that a
// "user:password@" prefix is cut defensively.
func RedactURL(u string) string {
	parsed, err := url.Parse(u)
	if err == nil && parsed.Scheme != "" && parsed.Host != "" {
		if parsed.User == nil {
			return u
		}
		if _, hasPassword := parsed.User.Password(); !hasPassword && parsed.Scheme == "ssh" {
			// ssh://git@host/... : the user name is part of the address
			// people recognise and is not a secret.
			return u
		}
		parsed.User = nil
		return parsed.String()
	}
	// scp-like syntax: only a user name can appear before '@'; anything
	// with a colon before '@' looks like user:password and is dropped.
	if at := strings.LastIndex(u, "@"); at >= 0 && strings.Contains(u[:at], ":") {
		return u[at+1:]
	}
	return u
}

// Redact replaces every occurrence of each secret in s with "***". It is a
// last line of defence for messages that quote third-party errors.
func Redact(s string, secrets ...string) string {
	for _, v := range secrets {
		if len(v) < 4 {
			// Replacing very short values would mangle the message
			// without protecting anything meaningful.
			continue
		}
		s = strings.ReplaceAll(s, v, "***")
	}
	return s
}
