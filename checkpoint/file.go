package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// fileObjects keeps objects as files under a directory, typically shared
// storage (NFS, Lustre, a mounted bucket) that every node sees.
//
// An object is written to a temporary file in its final directory, synced,
// then renamed into place and its directory synced: a reader sees the whole
// file or none, and a committed manifest never outlives a crash that its
// files did not.
type fileObjects struct {
	root string
}

var _ objects = (*fileObjects)(nil)

// A file store's folders and files are for the agents and servers that
// share it (its owner and group), never for other users: tasks run as
// users of their own and must not read other jobs' checkpoints.
const (
	dirMode  = 0o750
	fileMode = 0o640
)

// tmpMarker is in the name of every file being written; a name starting
// with a dot never collides with a job or checkpoint ID.
const tmpMarker = ".tmp-"

// openFile opens the store in root, a writable directory; create makes it
// first when it is missing (Options.CreateDir says when not to).
func openFile(root string, create bool) (*fileObjects, error) {
	if create {
		if err := os.MkdirAll(root, dirMode); err != nil {
			return nil, fmt.Errorf("create directory: %w", err)
		}
	}
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("directory %s does not exist (create it, or mount the shared storage): %w", root, ErrInvalid)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("%s is not a directory: %w", root, ErrInvalid)
	}
	probe, err := os.CreateTemp(root, tmpMarker+"probe-*")
	if err != nil {
		return nil, fmt.Errorf("directory %s is not writable: %w: %w", root, ErrInvalid, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return &fileObjects{root: root}, nil
}

func (f *fileObjects) path(key string) string {
	return filepath.Join(f.root, filepath.FromSlash(key))
}

func (f *fileObjects) put(ctx context.Context, key string, r io.ReaderAt, size int64) error {
	dst := f.path(key)
	dir := filepath.Dir(dst)
	if err := mkdirAllSync(dir); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+tmpMarker+"*")
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := copyContext(ctx, tmp, io.NewSectionReader(r, 0, size))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("wrote %d bytes of %d", n, size)
	}
	if err := tmp.Chmod(fileMode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	committed = true
	return syncDir(dir)
}

func (f *fileObjects) get(_ context.Context, key string) (io.ReadCloser, error) {
	fh, err := os.Open(f.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoObject
	}
	if err != nil {
		return nil, err
	}
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		fh.Close()
		return nil, errNoObject
	}
	return fh, nil
}

func (f *fileObjects) children(_ context.Context, prefix string) ([]string, error) {
	entries, err := os.ReadDir(f.path(prefix))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (f *fileObjects) remove(_ context.Context, key string) error {
	p := f.path(key)
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(p))
}

func (f *fileObjects) removeAll(_ context.Context, prefix string) error {
	p := f.path(prefix)
	if err := os.RemoveAll(p); err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

// mkdirAllSync is os.MkdirAll that also syncs the parent of every directory
// it creates, so the new entries survive a crash.
func mkdirAllSync(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent == dir {
		return fmt.Errorf("%s does not exist", dir)
	}
	if err := mkdirAllSync(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// syncDir makes the entries of dir durable. A missing dir (removed by a
// concurrent prune) has nothing to sync.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
