package runner

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A test-only PostgreSQL server for the postgres:// backend tests (the
// product module cannot import dev/'s starter). It runs Debian's binaries
// (/usr/lib/postgresql/<version>/bin, else initdb on PATH) on 127.0.0.1 at a
// free port with password (SCRAM) authentication, its data in the test's temp
// dir, and is stopped when the test ends. PostgreSQL refuses to run as root:
// as root it runs as the postgres system user.

const (
	pgUser     = "stackpilot"
	pgPassword = "pg-s3cret-Passw0rd"
)

// postgresBin is the folder of the newest installed PostgreSQL's programs.
func postgresBin(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) < pgVersion(dirs[j]) })
	if len(dirs) > 0 {
		return filepath.Dir(dirs[len(dirs)-1])
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		t.Skip("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb, no initdb on PATH): apt-get install postgresql")
	}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real
	}
	return filepath.Dir(initdb)
}

func pgVersion(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// postgresCredential is who the server runs as: this user, or postgres when
// this is root.
func postgresCredential(t *testing.T) (*syscall.Credential, int, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, os.Getuid(), os.Getgid()
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("running as root and there is no postgres user to run PostgreSQL as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid
}

// startPostgres starts a server and returns the postgres:// URL of its
// "postgres" database for user pgUser with password pgPassword (in the URL).
func startPostgres(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs PostgreSQL")
	}
	bin := postgresBin(t)
	cred, uid, gid := postgresCredential(t)
	dir := t.TempDir()
	if cred != nil {
		// The server's user must reach its folder: t.TempDir's parents are
		// root's, mode 0700.
		for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = dir
		return cmd
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(pgPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pwfile, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if out, err := command("initdb", "-D", data, "-U", pgUser, "--pwfile", pwfile, "-A", "scram-sha-256",
		"--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freeTCPPort(t)
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	server := command("postgres", "-D", data, "-k", dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	server.Stdout, server.Stderr = logFile, logFile
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = server.Process.Signal(syscall.SIGINT) // fast shutdown
		_ = server.Wait()
		_ = logFile.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		out, err := command("pg_isready", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", pgUser).CombinedOutput()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("PostgreSQL not ready: %v: %s\n%s", err, strings.TrimSpace(string(out)), log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", pgUser, pgPassword, port)
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
