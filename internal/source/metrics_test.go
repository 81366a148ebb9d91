package source

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

func TestHostIsTheHostAlone(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://user:s3cret-token@git.example.com/org/repo.git", "git.example.com"},
		{"https://x-access-token:ghp_abcdef@github.com:8443/org/repo?x=1#frag", "github.com:8443"},
		{"http://127.0.0.1:34567/repo.git", "127.0.0.1:34567"},
		{"ssh://git@GitHub.com/org/repo.git", "github.com"},
		{"git@github.com:org/repo.git", "github.com"},
		{"deploy:hunter22@github.com:org/repo.git", "github.com"},
		{"ghcr.io/org/app", "ghcr.io"},
		{"127.0.0.1:5000/org/app", "127.0.0.1:5000"},
		{"oci://registry.local:5000/app", "registry.local:5000"},
		{"http://source-controller.flux-system.svc.cluster.local./gitrepository/ns/name/abc.tar.gz", "source-controller.flux-system.svc.cluster.local."},
		{"http://[::1]:8080/x", "[::1]:8080"},
		{"", "unknown"},
		{"https:///nohost", "unknown"},
		{"https://%zz", "unknown"},
	} {
		got := Host(c.in)
		if got != c.want {
			t.Errorf("Host(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3cret", "ghp_", "hunter22", "deploy", "org", "repo"} {
			if strings.Contains(got, secret) {
				t.Errorf("Host(%q) = %q: carries %q", c.in, got, secret)
			}
		}
	}
}

func TestRequestCountsByKindAndHost(t *testing.T) {
	url := "https://user:password@counted.example:9443/org/repo.git"
	before := testutil.ToFloat64(requestsTotal.WithLabelValues(KindGitLsRemote, "counted.example:9443"))
	histBefore := testutil.CollectAndCount(fetchSeconds)
	Request(KindGitLsRemote, url)()
	Request(KindGitLsRemote, url)()
	if got := testutil.ToFloat64(requestsTotal.WithLabelValues(KindGitLsRemote, "counted.example:9443")) - before; got != 2 {
		t.Fatalf("requests counted = %v, want 2", got)
	}
	if testutil.CollectAndCount(fetchSeconds) < max(histBefore, 1) {
		t.Fatal("no duration observed")
	}
	// No label of any series names the credentials or the path.
	problems, err := testutil.CollectAndLint(requestsTotal)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	out, err := testutil.CollectAndFormat(requestsTotal, expfmt.TypeTextPlain)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"password", "user", "/org", "repo.git"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("the metrics carry %q:\n%s", bad, out)
		}
	}
}
