package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startPostgres runs a PostgreSQL server (Debian's: initdb and postgres
// from PATH) for the test and returns a postgres:// backend URL for Pulumi's
// DIY PostgreSQL backend. It listens on 127.0.0.1 at a free port, trusts
// local connections, and is stopped at the end of the test. initdb refuses
// to run as root: as root the server runs as the postgres user.
func startPostgres(t *testing.T) string {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		t.Skip("PostgreSQL is not installed (no initdb on PATH): apt-get install postgresql")
	}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real
	}
	bin := filepath.Dir(initdb)
	dir, err := os.MkdirTemp("", "stackpilot-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root and there is no postgres user to run PostgreSQL as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	command := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = dir
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := command(context.Background(), "initdb", "-D", data, "-A", "trust", "-U", "stackpilot", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	logFile, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	server := command(context.Background(), "postgres", "-D", data, "-k", dir, "-p", strconv.Itoa(port),
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
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := command(context.Background(), "pg_isready", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "stackpilot").CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("PostgreSQL not ready: %v: %s\n%s", err, strings.TrimSpace(string(out)), log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Sprintf("postgres://stackpilot@127.0.0.1:%d/postgres?sslmode=disable", port)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pulumiCLI runs the pinned pulumi CLI against backend, as a person at a
// terminal would, and returns its output.
func pulumiCLI(t *testing.T, backend string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.BinDir, "pulumi"), append([]string{"--non-interactive"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PULUMI_BACKEND_URL="+backend, "PULUMI_HOME="+t.TempDir(),
		"PULUMI_CONFIG_PASSPHRASE="+passphrase, "PULUMI_SKIP_UPDATE_CHECK=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
