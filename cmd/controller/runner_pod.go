package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/stackpilot/stackpilot/internal/opchannel"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// runnerPod is `stackpilot-controller runner pod --endpoint URL --ca-file FILE
// --credential-file FILE --operation ID --work-root DIR`: the runner of one
// operation of the Job executor, in its Pod (opchannel.RunPod). It exits 0
// once the controller took the operation's result, whatever the outcome; 1
// when it could not deliver one; 2 on a usage error.
func runnerPod(args []string) int {
	fs := flag.NewFlagSet("runner pod", flag.ContinueOnError)
	var o opchannel.PodOptions
	fs.StringVar(&o.Endpoint, "endpoint", "", "https://host:port of the controller's runner channel")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM file of the CA to trust for the endpoint")
	fs.StringVar(&o.CredentialFile, "credential-file", "", "file holding the operation's credential")
	fs.StringVar(&o.OperationID, "operation", "", "the operation ID")
	fs.StringVar(&o.WorkRoot, "work-root", "", "writable, empty directory for the program, PULUMI_HOME, the engine log and progress")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.Endpoint == "" || o.CAFile == "" || o.CredentialFile == "" || o.OperationID == "" || o.WorkRoot == "" {
		fmt.Fprintln(os.Stderr, "runner pod: --endpoint, --ca-file, --credential-file, --operation and --work-root are required")
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// As the Local runner: plugins the CLI lost are adopted, and killed below.
	if err := runner.BecomeSubreaper(); err != nil {
		log.Warn("cannot adopt orphaned plugins (prctl PR_SET_CHILD_SUBREAPER)", "error", err)
	}
	log.Info("operation started", "id", o.OperationID, "endpoint", o.Endpoint)
	err := opchannel.RunPod(context.Background(), o)
	runner.KillDescendants()
	if err != nil {
		log.Error("no result delivered", "id", o.OperationID, "error", err)
		return 1
	}
	log.Info("result delivered", "id", o.OperationID)
	return 0
}

// installRunner is `stackpilot-controller install-runner DIR`: it copies this
// binary to DIR/stackpilot-runner (mode 0555). The Job executor's init
// container runs it from the controller's image, which has no cp, to put the
// runner into an emptyDir the user's image then runs it from.
func installRunner(args []string) int {
	if len(args) != 1 || args[0] == "" {
		fmt.Fprintln(os.Stderr, "usage: stackpilot-controller install-runner DIR")
		return 2
	}
	if err := copySelf(filepath.Join(args[0], "stackpilot-runner")); err != nil {
		fmt.Fprintln(os.Stderr, "install-runner:", err)
		return 1
	}
	return 0
}

// copySelf copies the running binary to dst through a temporary file renamed
// over it, so that dst is never a partial binary.
func copySelf(dst string) (err error) {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), ".stackpilot-runner-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(out.Name())
		}
	}()
	_, err = io.Copy(out, in)
	err = errors.Join(err, out.Chmod(0o555), out.Close())
	if err != nil {
		return err
	}
	return os.Rename(out.Name(), dst)
}
