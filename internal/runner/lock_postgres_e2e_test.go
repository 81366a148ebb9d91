package runner

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lib/pq"
)

// pgLocks is the lock table of a postgres:// backend, read and written as the
// pulumi CLI does (pkg/backend/diy/postgres: table pulumi_state, data JSON
// {"data": base64 of the blob}).
type pgLocks struct {
	t  *testing.T
	db *sql.DB
}

func openPGLocks(t *testing.T, backend string) pgLocks {
	t.Helper()
	connector, err := pq.NewConnector(backend)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	t.Cleanup(func() { _ = db.Close() })
	return pgLocks{t: t, db: db}
}

// write stores a lock under key exactly as the CLI's Lock does, through its
// bucket's writer (base64 in {"data": ...}, upserted).
func (p pgLocks) write(key, hostname string, pid int, at time.Time) {
	p.t.Helper()
	data, _ := json.Marshal(map[string]string{"data": base64.StdEncoding.EncodeToString(cliLock(p.t, hostname, pid, at))})
	_, err := p.db.Exec("INSERT INTO pulumi_state (key, data) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET data = $2, updated_at = now()",
		key, string(data))
	if err != nil {
		p.t.Fatal(err)
	}
}

func (p pgLocks) keys() []string {
	p.t.Helper()
	rows, err := p.db.Query("SELECT key FROM pulumi_state WHERE key LIKE 'postgres/.pulumi/locks/%' ORDER BY key")
	if err != nil {
		p.t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			p.t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

func (p pgLocks) remove(key string) {
	p.t.Helper()
	if _, err := p.db.Exec("DELETE FROM pulumi_state WHERE key = $1", key); err != nil {
		p.t.Fatal(err)
	}
}

const lockyProgram = "name: locky\nruntime: yaml\noutputs:\n  x: 1\n"

// TestRunPostgresStaleLockOfAGonePod: the lock a Job Pod left in a postgres://
// backend when it vanished mid-update is removed when the controller says the
// Pod is gone; any other lock stays, and the operation names it.
func TestRunPostgresStaleLockOfAGonePod(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, lockyProgram)
	e.backend = startPostgres(t)
	g.Expect(e.run(e.spec(OpUp)).Outcome).To(Equal(OutcomeSucceeded), "creates the stack and the CLI's table")
	db := openPGLocks(t, e.backend)
	// The database's name is the prefix of every key of the backend.
	key := goneLockKey("postgres")
	testStaleLockOfAGonePod(t, e, db, key, "/"+key, pgPassword)

	// The password in Env (PGPASSWORD) rather than in the URL: the runner
	// connects as the CLI does.
	e.backend = strings.Replace(e.backend, ":"+pgPassword+"@", "@", 1)
	e.env["PGPASSWORD"] = pgPassword
	db.write(key, "locky-op-7c9f2-x8k2p", 4242, time.Now())
	spec := e.spec(OpUp)
	spec.StaleLock = &StaleLock{Host: "locky-op-7c9f2-x8k2p", NotBefore: time.Now().Add(-time.Minute), HostGone: true}
	cleared := e.run(spec)
	g.Expect(cleared.Outcome).To(Equal(OutcomeSucceeded), cleared.Message)
	g.Expect(cleared.ClearedLocks).To(Equal(1))
	g.Expect(db.keys()).To(BeEmpty())
}

// TestRunPostgresStaleLockOfAKilledUp: a real `pulumi up` killed mid-update
// on this host leaves its lock in the table; the next operation asked to clear
// it finds the writer's pid dead and removes it.
func TestRunPostgresStaleLockOfAKilledUp(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, lockyProgram)
	e.backend = startPostgres(t)
	g.Expect(e.run(e.spec(OpUp)).Outcome).To(Equal(OutcomeSucceeded))
	db := openPGLocks(t, e.backend)
	started := time.Now()

	// The program blocks reading a FIFO nobody writes: the update holds its
	// lock until it is killed.
	dir := t.TempDir()
	g.Expect(syscall.Mkfifo(filepath.Join(dir, "gate"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(
		"name: locky\nruntime: yaml\nvariables:\n  gate:\n    fn::readFile: ./gate\noutputs:\n  x: 1\n  gate: ${gate}\n"), 0o600)).To(Succeed())
	up := exec.Command(filepath.Join(e.bin, "pulumi"), "up", "--yes", "--skip-preview", "--non-interactive", "--stack", "dev")
	up.Dir = dir
	up.Env = os.Environ()
	for k, v := range workspaceEnv(Spec{Backend: e.backend, Env: e.env}) {
		up.Env = append(up.Env, k+"="+v)
	}
	up.Env = append(up.Env, "PULUMI_HOME="+e.home)
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g.Expect(up.Start()).To(Succeed())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
			_ = up.Wait()
		}
	})
	g.Eventually(db.keys, 3*time.Minute, 200*time.Millisecond).Should(HaveLen(1), "the update takes its lock")
	g.Expect(syscall.Kill(-up.Process.Pid, syscall.SIGKILL)).To(Succeed())
	_ = up.Wait()
	killed = true
	g.Expect(db.keys()).To(HaveLen(1), "a killed CLI leaves its lock")

	host, err := os.Hostname()
	g.Expect(err).NotTo(HaveOccurred())
	spec := e.spec(OpUp)
	spec.StaleLock = &StaleLock{Host: host, NotBefore: started}
	res := e.run(spec)
	g.Expect(res.Outcome).To(Equal(OutcomeSucceeded), res.Message)
	g.Expect(res.ClearedLocks).To(Equal(1))
	g.Expect(db.keys()).To(BeEmpty())
}

// TestPostgresLockStoreRefusesAnUnsafeTable: the table name goes into SQL as
// the CLI puts it, unquoted, so one that is not a plain name is refused.
func TestPostgresLockStoreRefusesAnUnsafeTable(t *testing.T) {
	g := NewWithT(t)
	_, err := openLockStore(context.Background(), Spec{
		Backend: "postgres://u:pw-123@db:5432/state?table=x%20or%201", StackName: "dev"}, "web")
	g.Expect(err).To(MatchError(ContainSubstring("does not put into SQL")))
	g.Expect(err.Error()).NotTo(ContainSubstring("pw-123"))
	for _, ok := range []string{"", "my_state", "pulumi.state_2"} {
		s, err := openLockStore(context.Background(), Spec{Backend: "postgres://db/state?table=" + ok, StackName: "dev"}, "web")
		g.Expect(err).NotTo(HaveOccurred(), ok)
		g.Expect(s.close()).To(Succeed())
	}
}
