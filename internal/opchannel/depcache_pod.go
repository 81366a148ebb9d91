package opchannel

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// depsDir is the work root's folder of the dependency cache's files: Go's
// caches, an entry being restored, an entry being sent.
const depsDir = "deps"

// podLog is where the Pod says what it did with the dependency cache when
// it is not in the result: the container's log.
var podLog io.Writer = os.Stderr

// dependencies gives the program its dependencies before Pulumi runs
// (runner.Deps says which, where and how): restored from the cache of the
// operation's namespace when it holds the key, else installed by the
// package manager and offered to the cache. It points spec.ToolEnv at them
// and returns what the result says of the cache. An install that fails is
// the program's to fix (runner.DepsError); a cache that cannot be read or
// written only costs an install.
func dependencies(ctx context.Context, c *podClient, o PodOptions, spec *runner.Spec) (string, error) {
	root := filepath.Join(o.WorkRoot, depsDir)
	d, err := runner.PlanDeps(ctx, spec.WorkDir, root, spec.Env)
	if err != nil || d == nil {
		return "", err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	spec.ToolEnv = d.Env
	hit, err := restoreDeps(ctx, c, d, root, spec.Env)
	switch {
	case hit:
		fmt.Fprintf(podLog, "runner pod: %s dependencies restored from the cache (%s, key %s)\n", d.Runtime, d.Lockfile, d.Key)
		return runner.DepCacheHit, nil
	case ctx.Err() != nil:
		return runner.DepCacheMiss, ctx.Err()
	case err != nil:
		fmt.Fprintf(podLog, "runner pod: the dependency cache entry %s was not restored: %v; installing\n", d.Key, err)
	}
	if err := d.Install(ctx, spec.Env); err != nil {
		return runner.DepCacheMiss, err
	}
	storeDeps(ctx, c, d, root)
	return runner.DepCacheMiss, nil
}

// restoreDeps unpacks the entry of d.Key, when the controller has one, into
// a fresh folder with artifact.Untar and DepsLimits, then moves d.Paths
// from there into d.Base: an entry that escapes, is too large, or lacks one
// of them restores nothing. env is Spec.Env, for d.Restored.
func restoreDeps(ctx context.Context, c *podClient, d *runner.Deps, root string, env map[string]string) (bool, error) {
	stage := filepath.Join(root, "restore")
	defer os.RemoveAll(stage)
	found := false
	err := retry(ctx, fetchPatience, func(ctx context.Context) error {
		if err := os.RemoveAll(stage); err != nil {
			return &final{err}
		}
		body, err := c.getBody(ctx, "deps/"+d.Key)
		if se, ok := errors.AsType[*StatusError](err); ok && se.Code == http.StatusNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		defer body.Close()
		err = artifact.Untar(body, stage, DepsLimits)
		if _, ok := errors.AsType[*artifact.UnsafePathError](err); ok {
			return &final{err}
		}
		if _, ok := errors.AsType[*artifact.LimitError](err); ok {
			return &final{err}
		}
		found = err == nil
		return err
	})
	if err != nil || !found {
		return false, err
	}
	for _, p := range d.Paths {
		fi, err := os.Lstat(filepath.Join(stage, filepath.FromSlash(p)))
		if err != nil || !fi.IsDir() {
			return false, fmt.Errorf("the entry holds no folder %s", p)
		}
	}
	for _, p := range d.Paths {
		dst := filepath.Join(d.Base, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return false, err
		}
		if err := os.Rename(filepath.Join(stage, filepath.FromSlash(p)), dst); err != nil {
			return false, err
		}
	}
	if err := d.Restored(ctx, env); err != nil {
		// What was moved is half an install: gone, the install starts clean.
		for _, p := range d.Paths {
			_ = os.RemoveAll(filepath.Join(d.Base, filepath.FromSlash(p)))
		}
		return false, err
	}
	return true, nil
}

// errTooLarge is an install too large for an entry.
var errTooLarge = errors.New("too large")

// storeDeps sends what the install made to the cache, at most MaxDepsBytes
// compressed and DepsLimits uncompressed; past them, or when the install
// holds a link out of its folder, it says so and sends nothing. The next
// operation then installs again: nothing fails.
func storeDeps(ctx context.Context, c *podClient, d *runner.Deps, root string) {
	archive := filepath.Join(root, "upload.tar.gz")
	defer os.Remove(archive)
	size, err := packDeps(d, archive)
	if errors.Is(err, errTooLarge) {
		fmt.Fprintf(podLog, "runner pod: the %s install is not cached: it is larger than the cache's bounds (%d bytes compressed, %d bytes or %d files uncompressed)\n",
			d.Lockfile, MaxDepsBytes, DepsLimits.MaxBytes, DepsLimits.MaxFiles)
		return
	}
	if err != nil {
		fmt.Fprintf(podLog, "runner pod: the %s install is not cached: %v\n", d.Lockfile, err)
		return
	}
	err = retry(ctx, flushPatience, func(ctx context.Context) error {
		return c.putFile(ctx, "deps/"+d.Key, archive, size)
	})
	if err != nil {
		fmt.Fprintf(podLog, "runner pod: the %s install was not cached: %v\n", d.Lockfile, err)
		return
	}
	fmt.Fprintf(podLog, "runner pod: the %s install was cached (key %s, %d bytes)\n", d.Lockfile, d.Key, size)
}

// packDeps writes d.Paths under d.Base to archive as a tar.gz (regular
// files, folders, links, the exec bit; tarstream.go's entries) and returns
// its size.
func packDeps(d *runner.Deps, archive string) (int64, error) {
	f, err := os.OpenFile(archive, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	out := &boundedWriter{w: f, left: MaxDepsBytes}
	zw := gzip.NewWriter(out)
	tw := tar.NewWriter(zw)
	p := packer{d: d, tw: tw}
	for _, rel := range d.Paths {
		if err := filepath.WalkDir(filepath.Join(d.Base, filepath.FromSlash(rel)), p.walk); err != nil {
			if out.over {
				return 0, errTooLarge
			}
			return 0, err
		}
	}
	err = tw.Close()
	if err == nil {
		err = zw.Close()
	}
	if out.over {
		return 0, errTooLarge
	}
	if err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return MaxDepsBytes - out.left, nil
}

// packer walks the install's folders into a tar stream, counting what
// DepsLimits would refuse at the restore.
type packer struct {
	d     *runner.Deps
	tw    *tar.Writer
	files int
	bytes int64
}

func (p *packer) walk(full string, e fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(p.d.Base, full)
	if err != nil {
		return err
	}
	name := filepath.ToSlash(rel)
	if e.Type()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(full)
		if err != nil {
			return err
		}
		if p.d.LeftOut(name) {
			return nil
		}
		if t := path.Clean(path.Join(path.Dir(name), filepath.ToSlash(target))); filepath.IsAbs(target) || t == ".." || strings.HasPrefix(t, "../") {
			return fmt.Errorf("%s links out of the program's folder, to %s", name, target)
		}
	}
	p.files++
	if e.Type().IsRegular() {
		if fi, err := e.Info(); err == nil {
			p.bytes += fi.Size()
		}
	}
	if p.files > DepsLimits.MaxFiles || p.bytes > DepsLimits.MaxBytes {
		return errTooLarge
	}
	return writeEntry(p.tw, full, name, e)
}

// boundedWriter refuses to write past left bytes.
type boundedWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > b.left {
		b.over = true
		return 0, errTooLarge
	}
	n, err := b.w.Write(p)
	b.left -= int64(n)
	return n, err
}

// putFile sends the file at path as the body of a PUT of what.
func (c *podClient) putFile(ctx context.Context, what, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return &final{err}
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+what, f)
	if err != nil {
		return &final{err}
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+c.credential)
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return &StatusError{Code: resp.StatusCode, Text: strings.TrimSpace(string(text))}
	}
	return nil
}
