package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// objects is all a backend provides: whole objects under slash-separated
// keys. The checkpoint logic — layout, commit order, verification,
// retention — sits above it in store, once for every backend.
//
// Layout under the store's root:
//
//	<job>/<id>/files/<path>     the checkpoint's files
//	<job>/<id>/manifest.json    written last; its presence commits the checkpoint
type objects interface {
	// put stores the size bytes of r at key, replacing any object there.
	// The object appears whole or not at all, and is durable on return.
	put(ctx context.Context, key string, r io.ReaderAt, size int64) error
	// get opens the object at key; errNoObject when there is none.
	get(ctx context.Context, key string) (io.ReadCloser, error)
	// children lists the names one level below prefix/ that hold objects,
	// sorted; none when prefix holds nothing.
	children(ctx context.Context, prefix string) ([]string, error)
	// remove deletes the object at key, durably; a missing one is fine.
	remove(ctx context.Context, key string) error
	// removeAll deletes every object under prefix/.
	removeAll(ctx context.Context, prefix string) error
}

// errNoObject is what objects.get returns for a missing key.
var errNoObject = errors.New("no such object")

const (
	manifestName = "manifest.json"
	filesDir     = "files"
	// maxManifestSize bounds what is read as a manifest, so a stray huge
	// object cannot exhaust memory.
	maxManifestSize = 256 << 20
	// cleanupTimeout bounds removing a failed save's uploads after its
	// context has ended.
	cleanupTimeout = time.Minute
)

func manifestKey(job, id string) string { return path.Join(job, id, manifestName) }
func fileKey(job, id, p string) string  { return path.Join(job, id, filesDir, p) }

// store implements Store over any objects backend.
type store struct {
	objs objects
	opts Options

	mu        sync.Mutex
	lastNanos int64 // the newest ID time issued, so IDs from one store strictly increase
}

var _ Store = (*store)(nil)

func newStore(objs objects, opts Options) *store {
	return &store{objs: objs, opts: opts}
}

// newID returns a fresh checkpoint ID and its time: the clock's, or one
// nanosecond past the last issued if the clock has not moved on.
func (s *store) newID(attempt int) (string, time.Time, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("random ID suffix: %w", err)
	}
	s.mu.Lock()
	nanos := max(s.opts.Now().UnixNano(), s.lastNanos+1)
	s.lastNanos = nanos
	s.mu.Unlock()
	return newID(nanos, attempt, hex.EncodeToString(b[:])), time.Unix(0, nanos).UTC(), nil
}

func (s *store) Save(ctx context.Context, job, dir string, m Manifest) (Manifest, error) {
	if err := checkJob(job); err != nil {
		return Manifest{}, fmt.Errorf("save: %w", err)
	}
	switch {
	case m.Job != "" && m.Job != job:
		return Manifest{}, fmt.Errorf("save %s: manifest names job %q: %w", job, m.Job, ErrInvalid)
	case m.Attempt < 0:
		return Manifest{}, fmt.Errorf("save %s: negative attempt %d: %w", job, m.Attempt, ErrInvalid)
	case m.Step != nil && *m.Step < 0:
		return Manifest{}, fmt.Errorf("save %s: negative step %d: %w", job, *m.Step, ErrInvalid)
	case m.Layout.Replicas < 0 || m.Layout.GPUsPerReplica < 0:
		return Manifest{}, fmt.Errorf("save %s: negative layout %d×%d: %w", job, m.Layout.Replicas, m.Layout.GPUsPerReplica, ErrInvalid)
	}
	local, err := scanDir(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("save %s: %w", job, err)
	}
	if m.Step == nil {
		// A malformed report must not cost the checkpoint: the step is
		// informational, the files are what resume needs.
		m.Step, _ = ReadStep(dir)
	}
	id, created, err := s.newID(m.Attempt)
	if err != nil {
		return Manifest{}, fmt.Errorf("save %s: %w", job, err)
	}
	m.Format, m.ID, m.Job, m.Created = FormatVersion, id, job, created
	m.Files = make([]File, len(local))
	m.TotalBytes = 0

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for i, f := range local {
		g.Go(func() error {
			var err error
			m.Files[i], err = s.upload(gctx, fileKey(job, id, f.rel), f)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return Manifest{}, s.abandon(ctx, job, id, err)
	}
	for _, f := range m.Files {
		m.TotalBytes += f.Size
	}

	if s.opts.BeforeCommit != nil {
		if err := s.opts.BeforeCommit(ctx, m); err != nil {
			return Manifest{}, fmt.Errorf("save %s/%s: before commit: %w", job, id, err)
		}
	}
	// Uploads ignore a context cancelled after they finished; committing
	// must not.
	if err := ctx.Err(); err != nil {
		return Manifest{}, s.abandon(ctx, job, id, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, s.abandon(ctx, job, id, fmt.Errorf("encode manifest: %w", err))
	}
	if err := s.objs.put(ctx, manifestKey(job, id), bytes.NewReader(data), int64(len(data))); err != nil {
		return Manifest{}, s.abandon(ctx, job, id, fmt.Errorf("commit manifest: %w", err))
	}
	return m, nil
}

// abandon removes what a failed save uploaded, even if ctx has ended, and
// returns the save's error. What it cannot remove Prune collects later.
func (s *store) abandon(ctx context.Context, job, id string, err error) error {
	err = fmt.Errorf("save %s/%s: %w", job, id, err)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if cerr := s.removeCheckpoint(cctx, job, id); cerr != nil {
		return fmt.Errorf("%w (removing the partial upload also failed: %v)", err, cerr)
	}
	return err
}

// removeCheckpoint deletes the manifest first, so a checkpoint that is
// half removed is uncommitted rather than corrupt.
func (s *store) removeCheckpoint(ctx context.Context, job, id string) error {
	if err := s.objs.remove(ctx, manifestKey(job, id)); err != nil {
		return err
	}
	return s.objs.removeAll(ctx, path.Join(job, id))
}

// localFile is a file found under the directory being saved.
type localFile struct {
	rel string // slash-separated, relative to the directory
	abs string
}

// scanDir lists the files under dir, sorted by relative path. Symbolic
// links to regular files count as those files; anything else that is not a
// regular file or directory is an error.
func scanDir(dir string) ([]localFile, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory: %w: %w", ErrInvalid, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint directory %s is not a directory: %w", dir, ErrInvalid)
	}
	var files []localFile
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if err := checkPath(rel); err != nil {
			return err
		}
		mode := d.Type()
		if mode&fs.ModeSymlink != 0 {
			target, err := os.Stat(p)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			mode = target.Mode().Type()
		}
		if !mode.IsRegular() {
			return fmt.Errorf("%s: not a regular file (%s)", rel, mode)
		}
		files = append(files, localFile{rel: rel, abs: p})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w: %w", dir, ErrInvalid, err)
	}
	if len(files) == 0 {
		// An empty checkpoint would become the latest and hide the last
		// good one.
		return nil, fmt.Errorf("checkpoint directory %s holds no files: %w", dir, ErrInvalid)
	}
	slices.SortFunc(files, func(a, b localFile) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}

// upload hashes one local file and stores it at key. It hashes first and
// uploads second (S3 needs a seekable body), so it checks that the file did
// not change in between.
func (s *store) upload(ctx context.Context, key string, f localFile) (File, error) {
	fh, err := os.Open(f.abs)
	if err != nil {
		return File{}, err
	}
	defer fh.Close()
	before, err := fh.Stat()
	if err != nil {
		return File{}, err
	}
	size := before.Size()
	h := sha256.New()
	if _, err := copyContext(ctx, h, io.NewSectionReader(fh, 0, size)); err != nil {
		return File{}, fmt.Errorf("hash %s: %w", f.rel, err)
	}
	if err := s.objs.put(ctx, key, fh, size); err != nil {
		return File{}, fmt.Errorf("upload %s: %w", f.rel, err)
	}
	after, err := fh.Stat()
	if err != nil {
		return File{}, err
	}
	if after.Size() != size || !after.ModTime().Equal(before.ModTime()) {
		return File{}, fmt.Errorf("%s changed while it was being saved: %w", f.rel, ErrInvalid)
	}
	return File{Path: f.rel, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func (s *store) Latest(ctx context.Context, job string) (Manifest, error) {
	if err := checkJob(job); err != nil {
		return Manifest{}, fmt.Errorf("latest: %w", err)
	}
	ids, err := s.ids(ctx, job)
	if err != nil {
		return Manifest{}, fmt.Errorf("latest %s: %w", job, err)
	}
	for _, id := range ids {
		m, err := s.readManifest(ctx, job, id)
		switch {
		case err == nil:
			return m, nil
		case errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt):
			continue // uncommitted or unreadable: never the latest
		default:
			return Manifest{}, fmt.Errorf("latest %s: %w", job, err)
		}
	}
	return Manifest{}, fmt.Errorf("latest %s: %w", job, ErrNotFound)
}

func (s *store) List(ctx context.Context, job string) ([]Manifest, error) {
	if err := checkJob(job); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	ids, err := s.ids(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", job, err)
	}
	list := []Manifest{}
	for _, id := range ids {
		m, err := s.readManifest(ctx, job, id)
		switch {
		case err == nil:
			list = append(list, m)
		case errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt):
		default:
			return nil, fmt.Errorf("list %s: %w", job, err)
		}
	}
	return list, nil
}

// ids lists the checkpoint IDs stored for job, committed or not, newest
// first. Entries that are not checkpoint IDs are left alone.
func (s *store) ids(ctx context.Context, job string) ([]string, error) {
	names, err := s.objs.children(ctx, job)
	if err != nil {
		return nil, err
	}
	ids := slices.DeleteFunc(names, func(n string) bool { return !idPattern.MatchString(n) })
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids, nil
}

// readManifest returns the verified manifest of checkpoint id: ErrNotFound
// when it has none (not committed), ErrCorrupt when it does not verify.
func (s *store) readManifest(ctx context.Context, job, id string) (Manifest, error) {
	rc, err := s.objs.get(ctx, manifestKey(job, id))
	if errors.Is(err, errNoObject) {
		return Manifest{}, fmt.Errorf("checkpoint %s/%s: %w", job, id, ErrNotFound)
	}
	if err != nil {
		return Manifest{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestSize+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest of %s/%s: %w", job, id, err)
	}
	if len(data) > maxManifestSize {
		return Manifest{}, fmt.Errorf("manifest of %s/%s is over %d bytes: %w", job, id, maxManifestSize, ErrCorrupt)
	}
	return decodeManifest(data, job, id)
}

func (s *store) Restore(ctx context.Context, job, id, dir string) (Manifest, error) {
	if err := checkJob(job); err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	var m Manifest
	var err error
	switch {
	case id == "":
		m, err = s.Latest(ctx, job)
	case !idPattern.MatchString(id):
		err = fmt.Errorf("%q is not a checkpoint ID: %w", id, ErrNotFound)
	default:
		m, err = s.readManifest(ctx, job, id)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("restore %s: %w", job, err)
	}
	if err := s.restore(ctx, m, dir); err != nil {
		if errors.Is(err, ErrCorrupt) {
			// Files vanish when a concurrent Prune or Delete removes the
			// checkpoint; that is not found, not corrupt.
			if _, merr := s.readManifest(ctx, job, m.ID); errors.Is(merr, ErrNotFound) {
				err = fmt.Errorf("removed while restoring: %w", ErrNotFound)
			}
		}
		return Manifest{}, fmt.Errorf("restore %s/%s into %s: %w", job, m.ID, dir, err)
	}
	return m, nil
}

// restore downloads m's files into a fresh directory beside dir and moves
// it to dir once every file has verified.
func (s *store) restore(ctx context.Context, m Manifest, dir string) error {
	if err := checkEmpty(dir); err != nil {
		return err
	}
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".restore-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, f := range m.Files {
		g.Go(func() error { return s.download(gctx, fileKey(m.Job, m.ID, f.Path), f, tmp) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	// Remove fails unless dir is still empty, so a concurrent writer's
	// files are never replaced.
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	done = true
	return nil
}

// checkEmpty reports an ErrInvalid error unless dir is missing or an empty
// directory.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("target: %w: %w", ErrInvalid, err)
	case len(entries) > 0:
		return fmt.Errorf("target directory is not empty: %w", ErrInvalid)
	}
	return nil
}

// download fetches one file into root and verifies its size and SHA-256.
func (s *store) download(ctx context.Context, key string, f File, root string) error {
	rc, err := s.objs.get(ctx, key)
	if errors.Is(err, errNoObject) {
		return fmt.Errorf("file %s is missing: %w", f.Path, ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	defer rc.Close()
	p := filepath.Join(root, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	// Read one byte past the expected size to notice a longer object.
	n, err := copyContext(ctx, io.MultiWriter(out, h), io.LimitReader(rc, f.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("file %s: %w", f.Path, err)
	case n != f.Size:
		return fmt.Errorf("file %s has %d bytes, manifest says %d: %w", f.Path, n, f.Size, ErrCorrupt)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
		return fmt.Errorf("file %s has SHA-256 %s, manifest says %s: %w", f.Path, sum, f.SHA256, ErrCorrupt)
	}
	return nil
}

func (s *store) Prune(ctx context.Context, job string, keep int) (int, error) {
	if err := checkJob(job); err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	if keep < 1 {
		return 0, fmt.Errorf("prune %s: keep %d, want at least 1 (Delete removes all): %w", job, keep, ErrInvalid)
	}
	ids, err := s.ids(ctx, job)
	if err != nil {
		return 0, fmt.Errorf("prune %s: %w", job, err)
	}
	abandonedBefore := s.opts.Now().Add(-s.opts.AbandonAfter)
	var doomed []string
	kept := 0
	for _, id := range ids {
		_, err := s.readManifest(ctx, job, id)
		switch {
		case err == nil:
			if kept < keep {
				kept++
			} else {
				doomed = append(doomed, id)
			}
		case errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt):
			// Not committed: a save in progress, or one that died. Only
			// age tells them apart.
			if t, _, _ := parseID(id); t.Before(abandonedBefore) {
				doomed = append(doomed, id)
			}
		default:
			return 0, fmt.Errorf("prune %s: %w", job, err)
		}
	}
	for i, id := range doomed {
		if err := s.removeCheckpoint(ctx, job, id); err != nil {
			return i, fmt.Errorf("prune %s: remove %s: %w", job, id, err)
		}
	}
	return len(doomed), nil
}

func (s *store) Delete(ctx context.Context, job string) error {
	if err := checkJob(job); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	ids, err := s.ids(ctx, job)
	if err != nil {
		return fmt.Errorf("delete %s: %w", job, err)
	}
	// Uncommit everything first, so no reader restores a checkpoint whose
	// files are going.
	for _, id := range ids {
		if err := s.objs.remove(ctx, manifestKey(job, id)); err != nil {
			return fmt.Errorf("delete %s: %w", job, err)
		}
	}
	if err := s.objs.removeAll(ctx, job); err != nil {
		return fmt.Errorf("delete %s: %w", job, err)
	}
	return nil
}

// copyContext is io.Copy that stops between chunks once ctx ends, so a
// cancelled save or restore of a large file returns promptly.
func copyContext(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		nr, rerr := src.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				return n, werr
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
