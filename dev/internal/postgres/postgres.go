// Package postgres runs a throwaway PostgreSQL server for tests, from the
// machine's Debian binaries (/usr/lib/postgresql/<version>/bin): a fresh
// cluster in a directory of its own under /var/tmp, listening on 127.0.0.1 and
// on any extra addresses (such as the one-node cluster's Pod gateway) at a
// free port, with one database owned by one role that logs in with a password
// (scram-sha-256; no Unix socket, no trust). URL is a Pulumi DIY backend URL
// for it.
//
// PostgreSQL refuses to run as root: as root, the server runs as the
// `postgres` system user (which Debian's package creates) and its directory
// belongs to that user. The server dies with the process that started it (a
// parent-death signal), and Start removes the directories of servers whose
// owner is gone, so a test killed before its cleanup leaves nothing that
// breaks the next run.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/internal/daemon"
	"github.com/stackpilot/stackpilot/internal/procfs"
)

// Options configure Start. Everything is optional.
type Options struct {
	// ListenAddrs are addresses to listen on besides 127.0.0.1.
	ListenAddrs []string
	// Database and User default to "stackpilot"; Password to a random one.
	Database, User, Password string
	// BinDir holds initdb, postgres and psql; default the newest
	// /usr/lib/postgresql/*/bin.
	BinDir string
	// TempDir is where the server's directory is made; default /var/tmp
	// (the `postgres` user cannot enter a test's private temp directory).
	TempDir string
}

// Server is a running PostgreSQL server.
type Server struct {
	// Dir holds the data directory, the log and the owner file; Stop removes it.
	Dir string
	// Port is the TCP port on 127.0.0.1 and on each of ListenAddrs.
	Port                     int
	Database, User, Password string

	bin  string
	cmd  *exec.Cmd
	done chan struct{}
	// superPassword is the superuser's, kept in memory for AddDatabase.
	superPassword string
}

// dirPrefix names the servers' directories, which cleanStale looks for.
const dirPrefix = "stackpilot-pg-"

// ownerFile holds the pid and start time of the process that started the server.
const ownerFile = "owner"

// Requirements reports what this machine lacks to run a server: nil means it can.
func Requirements() error {
	if _, err := binDir(""); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return errors.New("postgres: running as root and there is no `postgres` user to run PostgreSQL as: apt-get install postgresql")
		}
	}
	return nil
}

// Start initialises a fresh server and starts it; Stop ends it.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	bin, err := binDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.TempDir == "" {
		opts.TempDir = "/var/tmp"
	}
	cleanStale(opts.TempDir)
	s := &Server{Database: opts.Database, User: opts.User, Password: opts.Password, done: make(chan struct{})}
	if s.Database == "" {
		s.Database = "stackpilot"
	}
	if s.User == "" {
		s.User = "stackpilot"
	}
	if s.Password == "" {
		s.Password = randomHex(16)
	}
	if s.Dir, err = os.MkdirTemp(opts.TempDir, dirPrefix); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if err := writeOwner(s.Dir); err != nil {
		return nil, err
	}
	cred, err := runAs(s.Dir)
	if err != nil {
		return nil, err
	}
	superPassword := randomHex(16)
	if err := initdb(ctx, bin, s.Dir, cred, superPassword); err != nil {
		return nil, err
	}
	// A port free when picked may be taken by another test process before
	// the server binds it (FreePort's picks are unique within a process
	// only): the server then exits at once, and is started again on
	// another port.
	for attempt := 1; ; attempt++ {
		if s.Port, err = daemon.FreePort(); err != nil {
			return nil, err
		}
		if err := s.start(bin, cred, opts.ListenAddrs); err != nil {
			return nil, err
		}
		err = s.createDatabase(ctx, bin, superPassword)
		if err == nil {
			break
		}
		if !errors.Is(err, errServerExited) || !strings.Contains(s.Log(), "Address already in use") || attempt == 3 {
			return nil, err
		}
		s.cmd, s.done = nil, make(chan struct{})
	}
	s.bin = bin
	s.superPassword = superPassword
	return s, nil
}

// AddDatabase creates another role (random password) and a database it
// owns on the same server, as a second tenant's backend would be, and
// returns a Server for them: its Query and URLs use that role and database;
// its Stop does nothing (stop s). The new database keeps PostgreSQL's
// default grants (PUBLIC may connect), so what keeps s's role from the other
// tenant's tables is the tables' own privileges.
func (s *Server) AddDatabase(ctx context.Context, database, user string) (*Server, error) {
	o := &Server{Port: s.Port, Database: database, User: user, Password: randomHex(16), bin: s.bin, done: s.done}
	sql := fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD %s;\nCREATE DATABASE %s OWNER %s;\n",
		quoteIdent(o.User), quoteLiteral(o.Password), quoteIdent(o.Database), quoteIdent(o.User))
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "postgres")
	cmd.Env = append(os.Environ(), "PGPASSWORD="+s.superPassword, "PGCONNECT_TIMEOUT=60")
	cmd.Stdin = strings.NewReader(sql)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("postgres: add database %s: %v: %s", database, err, strings.TrimSpace(string(out)))
	}
	return o, nil
}

// Query runs sql (one or more statements) with psql as the server's user in
// its database and returns the rows, unaligned: one line per row, columns
// separated by |.
func (s *Server) Query(ctx context.Context, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", s.User, "-d", s.Database)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+s.Password, "PGCONNECT_TIMEOUT=60")
	cmd.Stdin = strings.NewReader(sql)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("postgres: psql: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// URL is the server's database as a Pulumi DIY backend URL (also a libpq
// connection URL) on 127.0.0.1.
func (s *Server) URL() string { return s.URLAt("127.0.0.1") }

// URLAt is URL for a client that reaches the server at host (one of
// Options.ListenAddrs, such as the Pod gateway).
func (s *Server) URLAt(host string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(s.User, s.Password),
		Host:     net.JoinHostPort(host, strconv.Itoa(s.Port)),
		Path:     "/" + s.Database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop kills the server (a fast shutdown, then SIGKILL) and removes its
// directory. It may be called more than once.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		s.cmd = nil
	}
	if s.Dir != "" {
		_ = os.RemoveAll(s.Dir)
	}
}

// errServerExited: the server stopped while it was being set up.
var errServerExited = errors.New("postgres: the server exited")

// Log is the server's log, for failure reports.
func (s *Server) Log() string {
	data, _ := os.ReadFile(filepath.Join(s.Dir, "postgres.log"))
	return string(data)
}

// binDir is dir, or the bin directory of the newest PostgreSQL installed.
func binDir(dir string) (string, error) {
	if dir == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
		if len(dirs) == 0 {
			return "", errors.New("postgres: no /usr/lib/postgresql/*/bin: apt-get install postgresql")
		}
		dir = dirs[0]
	}
	for _, b := range []string{"initdb", "postgres", "psql"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("postgres: %s missing from %s: apt-get install postgresql", b, dir)
		}
	}
	return dir, nil
}

// version is the major version in /usr/lib/postgresql/<version>/bin.
func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// runAs is the user the server runs as: this process's own, or `postgres` as
// root, which then gets dir.
func runAs(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("postgres: running as root and there is no `postgres` user to run PostgreSQL as: apt-get install postgresql")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// initdb makes the cluster: superuser `postgres` with superPassword, password
// logins over TCP from anywhere (the server listens only where it is told),
// nothing over a socket.
func initdb(ctx context.Context, bin, dir string, cred *syscall.Credential, superPassword string) error {
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(superPassword+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if cred != nil {
		if err := os.Chown(pwfile, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"),
		"-U", "postgres", "--pwfile="+pwfile, "--auth-host=scram-sha-256", "--auth-local=reject",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("postgres: initdb: %v\n%s", err, out)
	}
	// Clients on extra addresses (Pods) come from addresses initdb's
	// 127.0.0.1/32 and ::1/128 lines do not cover.
	hba, err := os.OpenFile(filepath.Join(dir, "data", "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = io.WriteString(hba, "host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n")
	if cerr := hba.Close(); err == nil {
		err = cerr
	}
	return err
}

// start runs postgres on 127.0.0.1 and extra at s.Port, with its log in
// s.Dir, killed when this process dies.
func (s *Server) start(bin string, cred *syscall.Credential, extra []string) error {
	logFile, err := os.Create(filepath.Join(s.Dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	listen := strings.Join(append([]string{"127.0.0.1"}, extra...), ",")
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(s.Dir, "data"),
		"-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses="+listen,
		"-c", "unix_socket_directories=",
		// A throwaway server on a shared disk: no fsync.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		// Each Pulumi operation holds up to two connections: the default
		// 20 concurrent Jobs (dev/bench/jobs) need about 40, plus margin.
		"-c", "max_connections=100", "-c", "shared_buffers=16MB")
	s.cmd.Dir = s.Dir
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Go sets the parent-death signal after switching to cred, which would
	// otherwise clear it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("postgres: start: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	return nil
}

// createDatabase creates the role and its database, as the superuser over
// TCP, retrying while the server starts. The passwords go through psql's
// environment and standard input, never its command line.
func (s *Server) createDatabase(ctx context.Context, bin, superPassword string) error {
	sql := fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD %s;\nCREATE DATABASE %s OWNER %s;\n",
		quoteIdent(s.User), quoteLiteral(s.Password), quoteIdent(s.Database), quoteIdent(s.User))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%w:\n%s", errServerExited, s.Log())
		default:
		}
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
			"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "postgres")
		// A loaded machine can take seconds to answer a connection: a
		// timed-out attempt is retried like a refused one, within the
		// two minutes.
		cmd.Env = append(os.Environ(), "PGPASSWORD="+superPassword, "PGCONNECT_TIMEOUT=20")
		cmd.Stdin = strings.NewReader(sql)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		last = strings.TrimSpace(string(out))
		// Until the server accepts connections; any other error is final.
		if !strings.Contains(last, "Connection refused") && !strings.Contains(last, "starting up") && !strings.Contains(last, "timeout expired") {
			return fmt.Errorf("postgres: create the database: %v: %s", err, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: not accepting connections within 2m: %s\n%s", last, s.Log())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func quoteIdent(s string) string   { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeOwner records this process (pid and start time) in dir/owner.
func writeOwner(dir string) error {
	st, err := procfs.ReadStat(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d %d\n", os.Getpid(), st.StartTicks), 0o644)
}

// cleanStale removes the directories of servers whose owner process is gone
// (their server died with it), and kills a server that somehow outlived it.
func cleanStale(tempDir string) {
	dirs, _ := filepath.Glob(filepath.Join(tempDir, dirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being made, or not ours
		}
		if f := strings.Fields(string(data)); len(f) == 2 && alive(f[0], f[1]) {
			continue
		}
		if pid, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			if p, err := strconv.Atoi(strings.SplitN(string(pid), "\n", 2)[0]); err == nil && p > 1 {
				if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err == nil && filepath.Base(exe) == "postgres" {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// alive reports whether the process pid that started at start still runs.
func alive(pid, start string) bool {
	p, err := strconv.Atoi(pid)
	if err != nil {
		return false
	}
	st, err := procfs.ReadStat(p)
	return err == nil && !st.Ended() && strconv.FormatUint(st.StartTicks, 10) == start
}
