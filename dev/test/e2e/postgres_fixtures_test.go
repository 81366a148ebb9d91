package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/dev/internal/postgres"
)

// startPostgres runs a PostgreSQL server for the test (dev/internal/postgres:
// Debian's binaries, password authentication, on 127.0.0.1), stopped at the
// end of the test. `make test` installs PostgreSQL; without it the test
// fails saying so.
func startPostgres(t *testing.T) *postgres.Server {
	t.Helper()
	if err := postgres.Requirements(); err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Start(context.Background(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	return pg
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
