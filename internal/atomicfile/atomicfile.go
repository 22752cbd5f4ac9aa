// Package atomicfile replaces files atomically and durably, for the
// agent's state files: a reader (or the next boot) never sees half a file.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with b: a temporary file in the same directory
// (created with dirMode if missing), synced, renamed over path, then the
// directory synced (best effort: some file systems refuse to sync a
// directory).
func Write(path string, b []byte, mode, dirMode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename: nothing to remove
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
