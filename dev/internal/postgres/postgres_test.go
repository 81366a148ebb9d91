package postgres_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/dev/internal/postgres"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// requirePostgres skips t without PostgreSQL (or fails it where the one-node
// cluster is required: the same script installs both).
func requirePostgres(t *testing.T) {
	t.Helper()
	if err := postgres.Requirements(); err != nil {
		if os.Getenv(testenv.RequireClusterEnv) == "1" {
			t.Fatalf("%s=1 but: %v", testenv.RequireClusterEnv, err)
		}
		t.Skip(err)
	}
}

// TestPulumiBackend starts a server that also listens on 127.0.0.2 and uses it
// as the pinned Pulumi CLI's DIY backend there: login, stack init, stack ls.
// Stop leaves no process and no directory.
func TestPulumiBackend(t *testing.T) {
	requirePostgres(t)
	g := NewWithT(t)
	ctx := context.Background()
	_, bin, err := testenv.Paths()
	g.Expect(err).NotTo(HaveOccurred())
	s, err := postgres.Start(ctx, postgres.Options{ListenAddrs: []string{"127.0.0.2"}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(s.Stop)
	backend := s.URLAt("127.0.0.2")
	g.Expect(backend).To(HavePrefix("postgres://stackpilot:"))
	g.Expect(backend).To(HaveSuffix("@127.0.0.2:" + strconv.Itoa(s.Port) + "/stackpilot?sslmode=disable"))

	home := t.TempDir()
	project := filepath.Join(home, "project")
	g.Expect(os.MkdirAll(project, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte("name: pgtest\nruntime: yaml\n"), 0o644)).To(Succeed())
	pulumi := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir = project
		cmd.Env = append(os.Environ(), "HOME="+home, "PULUMI_HOME="+filepath.Join(home, ".pulumi"),
			"PULUMI_CONFIG_PASSPHRASE=test-passphrase", "PULUMI_SKIP_UPDATE_CHECK=true")
		out, err := cmd.CombinedOutput()
		// The backend URL holds the password: never into the test's log.
		text := strings.ReplaceAll(string(out), s.Password, "<password>")
		g.Expect(err).NotTo(HaveOccurred(), "pulumi %s:\n%s", args[0], text)
		return text
	}
	pulumi("login", backend)
	pulumi("stack", "init", "dev")
	g.Expect(pulumi("stack", "ls")).To(MatchRegexp(`(?m)^dev\*?\s`))
	tables, err := s.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("tables Pulumi made: %q", tables)
	g.Expect(tables).To(Equal("pulumi_state"))
	keys, err := s.Query(ctx, "SELECT key FROM pulumi_state ORDER BY 1")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("its keys: %q", keys)
	g.Expect(keys).To(ContainSubstring("pgtest/dev"))
	// The state is in the database, not in PULUMI_HOME: a second home sees it.
	home = t.TempDir()
	pulumi("login", backend)
	g.Expect(pulumi("stack", "ls")).To(MatchRegexp(`(?m)^dev\*?\s`))

	dir, port := s.Dir, s.Port
	s.Stop()
	g.Expect(dir).NotTo(BeADirectory())
	_, err = net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	g.Expect(err).To(HaveOccurred(), "the server still listens after Stop")
}

// TestAddDatabase: a second role and database on the same server, each role
// at home in its own database and refused the other's table.
func TestAddDatabase(t *testing.T) {
	requirePostgres(t)
	g := NewWithT(t)
	ctx := context.Background()
	s, err := postgres.Start(ctx, postgres.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(s.Stop)
	o, err := s.AddDatabase(ctx, "other", "other")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Password).NotTo(Equal(s.Password))
	g.Expect(o.URL()).To(HaveSuffix(":" + strconv.Itoa(s.Port) + "/other?sslmode=disable"))
	_, err = o.Query(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('x');")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Query(ctx, "SELECT current_user, current_database(), count(*) FROM kept")).To(Equal("other|other|1"))

	// s's role, in o's database (PUBLIC may connect by default): refused the table.
	intruder := *o
	intruder.User, intruder.Password = s.User, s.Password
	_, err = intruder.Query(ctx, "SELECT count(*) FROM kept")
	g.Expect(err).To(MatchError(ContainSubstring("permission denied for table kept")))
	o.Stop() // a view of s: s still answers
	g.Expect(s.Query(ctx, "SELECT 1")).To(Equal("1"))
}
