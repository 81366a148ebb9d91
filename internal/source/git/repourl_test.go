package git

import "testing"

func TestNormalizeURL(t *testing.T) {
	same := []string{
		"https://github.com/Org/Repo",
		"https://github.com/org/repo.git",
		"https://GitHub.com:443/org/repo/",
		"http://github.com/org/repo",
		"ssh://git@github.com/org/repo.git",
		"ssh://git@github.com:22/org/repo",
		"git@github.com:org/repo.git",
		"github.com:org/repo",
		"https://user:secret@github.com/org/repo.git",
	}
	for _, u := range same {
		if got := NormalizeURL(u); got != "github.com/org/repo" {
			t.Errorf("NormalizeURL(%q) = %q, want github.com/org/repo", u, got)
		}
	}
	differ := [][2]string{
		{"https://github.com/org/repo", "https://github.com/org/repo2"},
		{"https://github.com/org/repo", "https://gitlab.com/org/repo"},
		{"http://127.0.0.1:8080/repo.git", "http://127.0.0.1:8081/repo.git"},
		{"https://github.com/org/repo", "https://github.com/other/repo"},
	}
	for _, p := range differ {
		if SameRepository(p[0], p[1]) {
			t.Errorf("SameRepository(%q, %q) is true", p[0], p[1])
		}
	}
	for _, bad := range []string{"", "not a url", "https://", "https://host", "/local/path"} {
		if got := NormalizeURL(bad); got != "" {
			t.Errorf("NormalizeURL(%q) = %q, want empty", bad, got)
		}
	}
	if SameRepository("", "") {
		t.Error("two empty URLs are not one repository")
	}
}
