// Package atomicfile writes a file so that a reader, or the process after a
// crash, sees either the old file whole or the new one whole, never part of
// one.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to a temporary file beside path (mode perm), syncs it and
// renames it over path. It never writes through an existing file, which
// matters where files may be hard links into a shared cache. On error the
// temporary file is removed and path is left as it was.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	// Synced before the rename: after a crash the file is whole or absent.
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
