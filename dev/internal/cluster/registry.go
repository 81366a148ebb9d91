package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// ServeRegistry serves an OCI distribution registry on l until ctx ends, with
// blobs on disk under dir (manifests are kept in memory). containerd pulls from
// it over plain HTTP through a mirror entry for its loopback address.
func ServeRegistry(ctx context.Context, l net.Listener, dir string, logw io.Writer) error {
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		return err
	}
	if logw == nil {
		logw = io.Discard
	}
	srv := &http.Server{
		Handler: registry.New(
			registry.Logger(log.New(logw, "registry: ", log.LstdFlags)),
			registry.WithBlobHandler(registry.NewDiskBlobHandler(filepath.Join(dir, "blobs"))),
		),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("cluster: registry: %w", err)
	}
	return nil
}

// startRegistry runs the registry: as its own process (RegistryCommand) when the
// cluster is detached, in this process otherwise.
func (c *Cluster) startRegistry(opts Options) error {
	dir := filepath.Join(c.Dir, "registry")
	if c.detach {
		if len(opts.RegistryCommand) == 0 {
			return errors.New("cluster: a detached cluster needs Options.RegistryCommand")
		}
		argv := append(append([]string{}, opts.RegistryCommand...), "--addr="+c.Registry, "--dir="+dir)
		_, err := c.startProc("registry", argv, nil)
		return err
	}
	l, err := net.Listen("tcp", c.Registry)
	if err != nil {
		return fmt.Errorf("cluster: registry: %w", err)
	}
	logFile, err := os.Create(filepath.Join(c.Dir, "logs", "registry.log"))
	if err != nil {
		l.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer logFile.Close()
		if err := ServeRegistry(ctx, l, dir, logFile); err != nil {
			fmt.Fprintln(logFile, err)
		}
	}()
	c.stopRegistry = func() { cancel(); <-done }
	return nil
}
