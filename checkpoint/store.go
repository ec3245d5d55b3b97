package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gangwayhq/gangway/internal/redact"
)

// Sentinel errors, wrapped with %w; check them with errors.Is.
var (
	// ErrNotFound: the job has no committed checkpoint, or none with that
	// ID.
	ErrNotFound = errors.New("checkpoint not found")
	// ErrCorrupt: a committed checkpoint does not match its manifest (a
	// file missing, a size or SHA-256 differs) or its manifest is
	// unreadable. Restoring it again will not help; an older one may.
	ErrCorrupt = errors.New("checkpoint corrupt")
	// ErrFormat: a manifest was written in a newer format than this build
	// reads. Upgrade rather than resume from an older checkpoint.
	ErrFormat = errors.New("checkpoint format too new")
	// ErrInvalid: bad input — a malformed store URL or options, a job ID
	// that cannot name a directory, an empty or unreadable checkpoint
	// directory, a non-empty restore target. Retrying the same call cannot
	// help.
	ErrInvalid = errors.New("invalid checkpoint request")
)

// Store keeps the checkpoints of many jobs. Its methods are safe for
// concurrent use, also by several processes (agents on different nodes)
// sharing one location.
//
// A checkpoint is committed when its manifest is stored, which Save does
// after every file is: Latest, List and Restore see committed checkpoints
// only, so a save that was interrupted (a crash, a cancelled context, a
// lost node) is never the latest. Every error carries the job and, where
// there is one, the checkpoint ID.
type Store interface {
	// Save uploads the files under dir as a new checkpoint of job and
	// returns its completed manifest. From m it takes Attempt, Layout,
	// Taken and Step; when Step is nil it is read from the workload's
	// report in dir (ReadStep), if any. ID, Created, Files, TotalBytes and Format are
	// filled in. dir must hold at least one file and must not change while
	// Save runs (a file that does is an error). Empty directories are not
	// kept. Save is not idempotent: every call that succeeds adds a
	// checkpoint with a new ID, even for identical contents. On error no
	// checkpoint is committed and what was uploaded is removed as far as
	// possible (Prune collects what is left).
	Save(ctx context.Context, job, dir string, m Manifest) (Manifest, error)
	// Latest returns the manifest of job's newest committed checkpoint.
	// Checkpoints without a manifest, or whose manifest does not verify,
	// are skipped; one whose manifest has a newer format stops the search
	// with ErrFormat rather than fall back to an older checkpoint. Latest
	// does not read the files: Restore verifies them. ErrNotFound when
	// there is none.
	Latest(ctx context.Context, job string) (Manifest, error)
	// List returns the manifests of job's committed checkpoints, newest
	// first; none is an empty list, not an error.
	List(ctx context.Context, job string) ([]Manifest, error)
	// Restore downloads checkpoint id of job ("" for the latest) into dir
	// and returns its manifest. Every file's size and SHA-256 is verified
	// (ErrCorrupt on a mismatch or a missing file); ErrNotFound when there
	// is no such committed checkpoint, or it is pruned or deleted while
	// being restored. A newer-format manifest gives ErrFormat, as it does
	// from Latest. dir must be missing or empty, and
	// its parent writable: files are downloaded next to it and moved into
	// place once all verify, so dir ends up holding the whole checkpoint
	// or stays as it was. Restore only reads the store.
	Restore(ctx context.Context, job, id, dir string) (Manifest, error)
	// Prune keeps job's newest keep committed checkpoints (keep >= 1) and
	// removes the older ones, along with interrupted saves older than
	// Options.AbandonAfter. It returns how many it removed. Each
	// checkpoint's manifest goes first, so a half-removed one is never
	// restored. Idempotent.
	Prune(ctx context.Context, job string, keep int) (removed int, err error)
	// Delete removes every checkpoint of job, committed or not. Deleting
	// a job with none succeeds. Idempotent.
	Delete(ctx context.Context, job string) error
}

// Options configures a Store. The zero value works for file:// stores and
// for S3 with the SDK's default region and credentials.
type Options struct {
	// Endpoint is an S3-compatible service's URL (MinIO, Ceph RGW, a test
	// server); empty means AWS. A custom endpoint also turns off the
	// SDK's optional request and response checksums, which such services
	// often reject; every file is still verified by SHA-256 on restore.
	Endpoint string
	// UsePathStyle addresses buckets as endpoint/bucket/key rather than
	// bucket.endpoint/key, as most S3-compatible services need.
	UsePathStyle bool
	// Region is the S3 region. Empty means the SDK's default chain
	// (AWS_REGION, the shared config), then us-east-1 when Endpoint is set.
	Region string
	// CreateDir makes Open create a file:// store's directory when it is
	// missing, so that a default path works on a fresh node. Leave it off
	// for a shared volume: creating the directory would hide a volume
	// that failed to mount behind a local directory no other node sees.
	CreateDir bool
	// AccessKeyID, SecretAccessKey and SessionToken are static S3
	// credentials. When AccessKeyID is empty the SDK's default chain is
	// used (environment, shared files, web identity, instance role).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string

	// PartSize is the size of a multipart upload part for files larger
	// than it (S3 only). Default 64 MiB; S3's minimum is 5 MiB.
	PartSize int64
	// Concurrency bounds the files (and, for a large file on S3, the parts
	// of each) transferred at once. Default 4.
	Concurrency int
	// AbandonAfter is how old an uncommitted checkpoint must be before
	// Prune treats it as abandoned (a save that crashed) rather than in
	// progress, and removes it. Default 24 hours.
	AbandonAfter time.Duration

	// Now is the clock for checkpoint IDs and creation times. Default
	// time.Now.
	Now func() time.Time
	// BeforeCommit, if set, is called by Save after every file is stored
	// and before the manifest is written. If it returns an error, Save
	// returns that error at once and leaves the stored files in place, as
	// a crash at that moment would. It is a fault-injection seam for tests
	// (storetest uses it); production code leaves it nil.
	BeforeCommit func(ctx context.Context, m Manifest) error
}

const (
	defaultPartSize     = 64 << 20
	minPartSize         = 5 << 20
	defaultConcurrency  = 4
	defaultAbandonAfter = 24 * time.Hour
)

func (o Options) withDefaults() Options {
	if o.PartSize == 0 {
		o.PartSize = defaultPartSize
	}
	if o.Concurrency == 0 {
		o.Concurrency = defaultConcurrency
	}
	if o.AbandonAfter == 0 {
		o.AbandonAfter = defaultAbandonAfter
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.PartSize < 0:
		return fmt.Errorf("options: PartSize %d is negative: %w", o.PartSize, ErrInvalid)
	case o.Concurrency < 0:
		return fmt.Errorf("options: Concurrency %d is negative: %w", o.Concurrency, ErrInvalid)
	case o.AbandonAfter < 0:
		return fmt.Errorf("options: AbandonAfter %s is negative: %w", o.AbandonAfter, ErrInvalid)
	case o.AccessKeyID != "" && o.SecretAccessKey == "":
		return fmt.Errorf("options: AccessKeyID is set but SecretAccessKey is empty: %w", ErrInvalid)
	case o.AccessKeyID == "" && (o.SecretAccessKey != "" || o.SessionToken != ""):
		return fmt.Errorf("options: SecretAccessKey or SessionToken is set but AccessKeyID is empty: %w", ErrInvalid)
	}
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("options: Endpoint %q is not an http(s)://host[:port] URL: %w", redact.URL(o.Endpoint), ErrInvalid)
		}
	}
	return nil
}

// Open opens the store at rawURL:
//
//	file:///abs/path     a directory, e.g. on shared storage; it must exist
//	                     unless Options.CreateDir is set
//	/abs/path            the same
//	s3://bucket[/prefix] an S3 bucket (or an S3-compatible one, see Options)
//
// Open checks that the directory or bucket is reachable. A malformed URL or
// options give an error wrapping ErrInvalid that names the URL and what is
// wrong with it.
func Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	loc, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("checkpoint store %q: %w", redact.URL(rawURL), err)
	}
	var objs objects
	switch loc.scheme {
	case "file":
		objs, err = openFile(loc.path, opts.CreateDir)
	case "s3":
		objs, err = openS3(ctx, loc.bucket, loc.prefix, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %q: %w", redact.URL(rawURL), err)
	}
	return newStore(objs, opts), nil
}

// location is a parsed store URL.
type location struct {
	scheme         string // "file" or "s3"
	path           string // file: absolute, clean
	bucket, prefix string // s3: prefix has no leading or trailing slash
}

func parseURL(rawURL string) (location, error) {
	bad := func(format string, args ...any) (location, error) {
		return location{}, fmt.Errorf("checkpoint store %q: %s: %w", redact.URL(rawURL), fmt.Sprintf(format, args...), ErrInvalid)
	}
	if rawURL == "" {
		return bad("empty URL (want file:///path or s3://bucket/prefix)")
	}
	if strings.HasPrefix(rawURL, "/") {
		return location{scheme: "file", path: filepath.Clean(rawURL)}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return bad("not a URL: %v", redact.Error(err))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return bad("query, fragment or user info are not supported")
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return bad("file URL names host %q; an absolute path needs three slashes (file:///%s%s)", u.Host, u.Host, u.Path)
		}
		if u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
			return bad("file URL has no absolute path (want file:///path)")
		}
		return location{scheme: "file", path: filepath.Clean(u.Path)}, nil
	case "s3":
		if u.Host == "" {
			return bad("no bucket (want s3://bucket/prefix)")
		}
		if u.Port() != "" {
			return bad("bucket %q has a port; set Options.Endpoint for a custom S3 endpoint", u.Host)
		}
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" && path.Clean(prefix) != prefix || prefix == "." || prefix == ".." || strings.HasPrefix(prefix, "../") {
			return bad("prefix %q is not a clean path (no empty, '.' or '..' segments)", prefix)
		}
		return location{scheme: "s3", bucket: u.Host, prefix: prefix}, nil
	case "":
		return bad("no scheme and not an absolute path (want file:///path or s3://bucket/prefix)")
	default:
		return bad("unsupported scheme %q (want file or s3)", u.Scheme)
	}
}
