package git

import (
	"net/url"
	"strings"
)

// NormalizeURL reduces a repository URL to "host/path", so that the forms
// one repository is known by compare equal: https://host/owner/repo,
// https://host/owner/repo.git, ssh://git@host/owner/repo and the scp-like
// git@host:owner/repo. User info, the default port of the scheme (80, 443,
// 22), a trailing ".git" or "/" are dropped and the result is lower-case
// (hosts are case-insensitive; GitHub, GitLab, Gitea and Bitbucket treat
// owner and repository names so too). Another port is kept: two servers on
// one host are two repositories. It returns "" for what is not a URL.
func NormalizeURL(raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	var host, path string
	if !strings.Contains(raw, "://") {
		// scp-like: [user@]host:path
		at := strings.LastIndex(raw, "@")
		rest := raw[at+1:]
		h, p, ok := strings.Cut(rest, ":")
		if !ok || h == "" || strings.ContainsAny(h, "/") {
			return ""
		}
		host, path = h, p
	} else {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return ""
		}
		host, path = u.Host, u.Path
		if port := u.Port(); port != "" && port == defaultPort(u.Scheme) {
			host = u.Hostname()
		}
	}
	path = strings.Trim(path, "/")
	path = strings.TrimSuffix(path, ".git")
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return ""
	}
	return strings.ToLower(host + "/" + path)
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	case "ssh", "git+ssh":
		return "22"
	case "git":
		return "9418"
	}
	return ""
}

// SameRepository reports whether two repository URLs name one repository
// (NormalizeURL of both is equal and not empty).
func SameRepository(a, b string) bool {
	na := NormalizeURL(a)
	return na != "" && na == NormalizeURL(b)
}
