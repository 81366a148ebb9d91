package benchenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
)

// ForceGC makes the controller started with --pprof-bind-address=addr run a
// garbage collection (pprof's heap profile with gc=1 does so first), so that
// its Go heap in use, read next, is what is live and not what the last busy
// minutes left for the collector: the figures of two idle measurements can
// then be compared.
func ForceGC(ctx context.Context, addr string) error {
	return heapProfile(ctx, addr, io.Discard)
}

// heapProfile writes the heap profile of the controller at addr, taken
// after a garbage collection, to w.
func heapProfile(ctx context.Context, addr string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: %s from %s", resp.Status, req.URL)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// HeapTop saves the heap profile of a controller started with
// --pprof-bind-address=addr into path and returns the top n entries of what
// is in use (`go tool pprof -top -sample_index=inuse_space`): where the
// per-Stack memory goes. The profile stays in the run's directory with -keep,
// for `go tool pprof -http` afterwards.
func HeapTop(ctx context.Context, addr, path string, n int) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := heapProfile(ctx, addr, f); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-sample_index=inuse_space",
		fmt.Sprintf("-nodecount=%d", n), path).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof %s: %v\n%s", path, err, out)
	}
	// Keep the summary lines and the table; drop pprof's file and build
	// header lines.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		lines = append(lines, "    "+l)
	}
	return strings.Join(lines, "\n"), nil
}
