package checkpoint

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// FormatVersion is the manifest format this package writes and reads. A
// store holding a manifest with a higher format was written by a newer
// Gangway; reading it fails with ErrFormat rather than silently falling
// back to an older checkpoint.
const FormatVersion = 1

// Manifest describes one committed checkpoint. It is stored as JSON next to
// the checkpoint's files and written last: a checkpoint exists once its
// manifest does.
type Manifest struct {
	// Format is the manifest format version (FormatVersion).
	Format int `json:"format"`
	// ID names the checkpoint within its job. IDs sort (as strings) in the
	// order the checkpoints were taken: "<unix nanos, 20 digits>-a<attempt>-<8 hex>".
	ID string `json:"id"`
	// Job is the job the checkpoint belongs to.
	Job string `json:"jobId"`
	// Attempt is the job's attempt (run) that wrote it, from 0 or 1 as the
	// caller counts.
	Attempt int `json:"attempt"`
	// Step is the training step the workload reported, if it reported one
	// (see ReadStep).
	Step *int64 `json:"step,omitempty"`
	// Created is when the save started, from the store's clock.
	Created time.Time `json:"created"`
	// Taken is when the workload finished writing the checkpoint, if the
	// saver knows (the agent: its complete marker's time), on the saver's
	// clock; zero when not known. A save starts after that, by up to the
	// agent's poll interval and the wait for an earlier upload, so the
	// work since the checkpoint is counted from Captured, not Created.
	Taken time.Time `json:"taken,omitzero"`
	// Layout is the GPU layout the checkpoint was taken on.
	Layout Layout `json:"layout"`
	// Files lists every file of the checkpoint, sorted by Path.
	Files []File `json:"files"`
	// TotalBytes is the sum of the files' sizes.
	TotalBytes int64 `json:"totalBytes"`
}

// Captured is when the checkpoint's state was captured: Taken when it is
// known and not after Created, else Created (a save never starts before
// the state it saves exists).
func (m Manifest) Captured() time.Time {
	if m.Taken.IsZero() || m.Taken.After(m.Created) {
		return m.Created
	}
	return m.Taken
}

// Layout is the GPU layout a checkpoint was taken on. A resumed run needs a
// compatible one (same gang shape; same model where the job asks for it).
type Layout struct {
	Replicas       int    `json:"replicas"`
	GPUsPerReplica int    `json:"gpusPerReplica"`
	GPUModel       string `json:"gpuModel,omitempty"`
}

// File is one file of a checkpoint.
type File struct {
	// Path is relative to the checkpoint directory, slash-separated.
	Path string `json:"path"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lowercase hex SHA-256 of the file's contents.
	SHA256 string `json:"sha256"`
}

// idPattern matches the IDs newID makes: nanoseconds since the Unix epoch,
// zero-padded so that string order is time order, the attempt, and a random
// suffix so that two savers (two processes, two nodes) never collide.
var idPattern = regexp.MustCompile(`^([0-9]{20})-a([0-9]+)-([0-9a-f]{8})$`)

// newID formats a checkpoint ID. suffix is 8 lowercase hex digits.
func newID(nanos int64, attempt int, suffix string) string {
	return fmt.Sprintf("%020d-a%d-%s", nanos, attempt, suffix)
}

// parseID returns the time and attempt an ID encodes.
func parseID(id string) (time.Time, int, bool) {
	m := idPattern.FindStringSubmatch(id)
	if m == nil {
		return time.Time{}, 0, false
	}
	nanos, err1 := strconv.ParseInt(m[1], 10, 64)
	attempt, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return time.Time{}, 0, false
	}
	return time.Unix(0, nanos).UTC(), attempt, true
}

// decodeManifest parses a stored manifest and checks that it is whole and
// belongs where it was found (job, id). Errors wrap ErrCorrupt, or
// ErrFormat for a manifest from a newer format.
func decodeManifest(data []byte, job, id string) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("manifest of checkpoint %s/%s: %w: %w", job, id, ErrCorrupt, err)
	}
	if m.Format > FormatVersion {
		return Manifest{}, fmt.Errorf("manifest of checkpoint %s/%s has format %d, this build reads up to %d: %w",
			job, id, m.Format, FormatVersion, ErrFormat)
	}
	if err := m.check(job, id); err != nil {
		return Manifest{}, fmt.Errorf("manifest of checkpoint %s/%s: %w: %w", job, id, ErrCorrupt, err)
	}
	return m, nil
}

// check reports why m is not a well-formed manifest of checkpoint id of
// job.
func (m Manifest) check(job, id string) error {
	if m.Format != FormatVersion {
		return fmt.Errorf("format %d, want %d", m.Format, FormatVersion)
	}
	if m.Job != job {
		return fmt.Errorf("job %q, want %q", m.Job, job)
	}
	if m.ID != id {
		return fmt.Errorf("id %q, want %q", m.ID, id)
	}
	if _, attempt, ok := parseID(id); !ok || attempt != m.Attempt {
		return fmt.Errorf("id %q does not match attempt %d", id, m.Attempt)
	}
	if m.Step != nil && *m.Step < 0 {
		return fmt.Errorf("negative step %d", *m.Step)
	}
	if m.Created.IsZero() {
		return errors.New("no creation time")
	}
	if m.Layout.Replicas < 0 || m.Layout.GPUsPerReplica < 0 {
		return fmt.Errorf("negative layout %d×%d", m.Layout.Replicas, m.Layout.GPUsPerReplica)
	}
	var total int64
	for i, f := range m.Files {
		if err := checkPath(f.Path); err != nil {
			return err
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return fmt.Errorf("files not sorted or duplicated at %q", f.Path)
		}
		if f.Size < 0 {
			return fmt.Errorf("file %q: negative size", f.Path)
		}
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 || hex.EncodeToString(b) != f.SHA256 {
			return fmt.Errorf("file %q: sha256 %q is not 64 lowercase hex digits", f.Path, f.SHA256)
		}
		total += f.Size
	}
	if total != m.TotalBytes {
		return fmt.Errorf("total bytes %d, files add up to %d", m.TotalBytes, total)
	}
	return nil
}

// checkPath reports why p cannot be a file's path in a manifest: it must be
// relative, slash-separated, clean and stay inside the checkpoint, so that
// restoring a tampered manifest cannot write outside the target directory.
func checkPath(p string) error {
	switch {
	case p == "" || !utf8.ValidString(p):
		return fmt.Errorf("file path %q: empty or not UTF-8", p)
	case path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("file path %q: not a clean relative path inside the checkpoint", p)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("file path %q: contains NUL", p)
	}
	return nil
}

// checkJob reports why job cannot name a job in a store: it becomes one path
// segment (a directory, a key prefix).
func checkJob(job string) error {
	switch {
	case job == "":
		return fmt.Errorf("empty job ID: %w", ErrInvalid)
	case len(job) > 255 || !utf8.ValidString(job):
		return fmt.Errorf("job ID %q: longer than 255 bytes or not UTF-8: %w", job, ErrInvalid)
	case job[0] == '.':
		return fmt.Errorf("job ID %q: starts with a dot: %w", job, ErrInvalid)
	}
	for _, r := range job {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("job ID %q: contains a slash, backslash or control character: %w", job, ErrInvalid)
		}
	}
	return nil
}
