package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/checkpoint/storetest"
)

func TestFileStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Fixture {
		root := t.TempDir()
		return storetest.Fixture{
			Open: func(t *testing.T, opts checkpoint.Options) checkpoint.Store {
				st, err := checkpoint.Open(context.Background(), "file://"+root, opts)
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			Put: func(t *testing.T, key string, data []byte) {
				p := filepath.Join(root, filepath.FromSlash(key))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			Remove: func(t *testing.T, key string) {
				if err := os.Remove(filepath.Join(root, filepath.FromSlash(key))); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// fakeS3 is an in-process S3 (gofakes3) behind an httptest server, with a
// client of its own for raw access, and a log of the requests it served.
type fakeS3 struct {
	url    string
	client *s3.Client

	mu        sync.Mutex
	requests  []string // "METHOD /path"
	onRequest func(r *http.Request)
}

const bucket = "checkpoints"

func startS3(t *testing.T) *fakeS3 {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	f := &fakeS3{}
	handler := gofakes3.New(backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		hook := f.onRequest
		f.mu.Unlock()
		if hook != nil {
			hook(r)
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.client = s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	})
	return f
}

// options are what a deployment against an S3-compatible store sets.
func (f *fakeS3) options(opts checkpoint.Options) checkpoint.Options {
	opts.Endpoint = f.url
	opts.UsePathStyle = true
	opts.Region = "us-east-1"
	opts.AccessKeyID, opts.SecretAccessKey = "AKID", "SECRET"
	return opts
}

func (f *fakeS3) keys(t *testing.T) []string {
	t.Helper()
	out, err := f.client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

func TestS3Store(t *testing.T) {
	const prefix = "team-a/ckpt"
	storetest.Run(t, func(t *testing.T) storetest.Fixture {
		f := startS3(t)
		return storetest.Fixture{
			Open: func(t *testing.T, opts checkpoint.Options) checkpoint.Store {
				st, err := checkpoint.Open(context.Background(), "s3://"+bucket+"/"+prefix+"/", f.options(opts))
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			Put: func(t *testing.T, key string, data []byte) {
				_, err := f.client.PutObject(context.Background(), &s3.PutObjectInput{
					Bucket: aws.String(bucket), Key: aws.String(prefix + "/" + key), Body: bytes.NewReader(data),
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			Remove: func(t *testing.T, key string) {
				_, err := f.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{
					Bucket: aws.String(bucket), Key: aws.String(prefix + "/" + key),
				})
				if err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// TestS3Layout checks what lands in the bucket: everything under the
// prefix, the manifest written last, large files as multipart uploads.
func TestS3Layout(t *testing.T) {
	ctx := context.Background()
	f := startS3(t)
	st, err := checkpoint.Open(ctx, "s3://"+bucket+"/p", f.options(checkpoint.Options{PartSize: 5 << 20, Concurrency: 1}))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 11<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.requests = nil
	f.mu.Unlock()
	m, err := st.Save(ctx, "job", dir, checkpoint.Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	base := path.Join("p", "job", m.ID)
	want := []string{base + "/files/big", base + "/files/small", base + "/manifest.json"}
	if diff := cmp.Diff(want, f.keys(t)); diff != "" {
		t.Errorf("bucket keys (-want +got):\n%s", diff)
	}

	f.mu.Lock()
	reqs := slices.Clone(f.requests)
	f.mu.Unlock()
	var puts []string
	for _, r := range reqs {
		if strings.HasPrefix(r, "PUT ") || strings.HasPrefix(r, "POST ") {
			puts = append(puts, r)
		}
	}
	// Concurrency 1: big's three parts (5+5+1 MiB) between create and
	// complete, then small, then the manifest.
	obj := "/" + bucket + "/" + base
	wantPuts := []string{
		"POST " + obj + "/files/big", "PUT " + obj + "/files/big", "PUT " + obj + "/files/big", "PUT " + obj + "/files/big",
		"POST " + obj + "/files/big", "PUT " + obj + "/files/small", "PUT " + obj + "/manifest.json",
	}
	if diff := cmp.Diff(wantPuts, puts); diff != "" {
		t.Errorf("write requests, path-style (-want +got):\n%s", diff)
	}
}

// TestS3CancelMidUpload cancels a save while a multipart upload is half
// done: no checkpoint, nothing left in the bucket, the upload aborted.
func TestS3CancelMidUpload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := startS3(t)
	st, err := checkpoint.Open(ctx, "s3://"+bucket, f.options(checkpoint.Options{PartSize: 5 << 20, Concurrency: 1}))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"a", "big"} {
		size := 1
		if name == "big" {
			size = 16 << 20
		}
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	f.onRequest = func(r *http.Request) {
		if r.URL.Query().Get("partNumber") == "2" {
			cancel()
		}
	}
	f.mu.Unlock()
	if _, err := st.Save(ctx, "job", dir, checkpoint.Manifest{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save cancelled mid-upload: %v, want context.Canceled", err)
	}
	if _, err := st.Latest(context.Background(), "job"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Latest after a cancelled save: %v, want ErrNotFound", err)
	}
	if keys := f.keys(t); len(keys) != 0 {
		t.Errorf("bucket after a cancelled save holds %q, want nothing", keys)
	}
	ups, err := f.client.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Errorf("%d multipart uploads left open, want them aborted", len(ups.Uploads))
	}
}

// TestSaveInputs covers what Save accepts in a checkpoint directory.
func TestSaveInputs(t *testing.T) {
	cases := map[string]struct {
		setup     func(t *testing.T, dir string)
		wantFiles []string
		wantErr   error
	}{
		"symlink to a file is saved as the file": {
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "real"), "x")
				symlink(t, "real", filepath.Join(dir, "latest"))
			},
			wantFiles: []string{"latest", "real"},
		},
		"symlink to a directory": {
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "sub", "f"), "x")
				symlink(t, "sub", filepath.Join(dir, "link"))
			},
			wantErr: checkpoint.ErrInvalid,
		},
		"dangling symlink": {
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "f"), "x")
				symlink(t, "gone", filepath.Join(dir, "link"))
			},
			wantErr: checkpoint.ErrInvalid,
		},
		"named pipe": {
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "f"), "x")
				if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
					t.Skip("mkfifo:", err)
				}
			},
			wantErr: checkpoint.ErrInvalid,
		},
		"empty directories are not kept": {
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "f"), "x")
				if err := os.MkdirAll(filepath.Join(dir, "empty", "dir"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			wantFiles: []string{"f"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			st, err := checkpoint.Open(context.Background(), t.TempDir(), checkpoint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			c.setup(t, dir)
			m, err := st.Save(context.Background(), "job", dir, checkpoint.Manifest{})
			if !errors.Is(err, c.wantErr) || (err == nil) != (c.wantErr == nil) {
				t.Fatalf("Save: %v, want %v", err, c.wantErr)
			}
			var got []string
			for _, f := range m.Files {
				got = append(got, f.Path)
			}
			if diff := cmp.Diff(c.wantFiles, got); diff != "" {
				t.Errorf("saved files (-want +got):\n%s", diff)
			}
		})
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	f := startS3(t)
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		url     string
		opts    checkpoint.Options
		wantErr []string // substrings, besides the URL itself
	}{
		"empty":                  {url: "", wantErr: []string{"empty URL"}},
		"relative path":          {url: "ckpt/dir", wantErr: []string{"no scheme"}},
		"unknown scheme":         {url: "gs://bucket/x", wantErr: []string{`unsupported scheme "gs"`}},
		"file with host":         {url: "file://mnt/ckpt", wantErr: []string{`names host "mnt"`, "file:///mnt/ckpt"}},
		"file missing dir":       {url: "file:///nonexistent/gangway", wantErr: []string{"does not exist", "mount"}},
		"file not a dir":         {url: "file://" + notDir, wantErr: []string{"is not a directory"}},
		"file with query":        {url: "file:///tmp?x=1", wantErr: []string{"query"}},
		"s3 no bucket":           {url: "s3:///prefix", wantErr: []string{"no bucket"}},
		"s3 with port":           {url: "s3://bucket:9000/p", wantErr: []string{"Options.Endpoint"}},
		"s3 dot-dot prefix":      {url: "s3://bucket/a/../b", wantErr: []string{"not a clean path"}},
		"s3 empty segment":       {url: "s3://bucket/a//b", wantErr: []string{"not a clean path"}},
		"s3 missing bucket":      {url: "s3://nope/p", opts: f.options(checkpoint.Options{}), wantErr: []string{`bucket "nope" does not exist`}},
		"s3 bad endpoint":        {url: "s3://b/p", opts: checkpoint.Options{Endpoint: "localhost:9000"}, wantErr: []string{"Endpoint", "http(s)"}},
		"s3 half credentials":    {url: "s3://b/p", opts: checkpoint.Options{AccessKeyID: "AK"}, wantErr: []string{"SecretAccessKey"}},
		"part size below S3 min": {url: "s3://b/p", opts: checkpoint.Options{PartSize: 1 << 20}, wantErr: []string{"PartSize"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := checkpoint.Open(context.Background(), c.url, c.opts)
			if !errors.Is(err, checkpoint.ErrInvalid) {
				t.Fatalf("Open(%q) = %v, want ErrInvalid", c.url, err)
			}
			for _, want := range append([]string{`"` + c.url + `"`}, c.wantErr...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open(%q) error %q does not mention %q", c.url, err, want)
				}
			}
		})
	}
}

func TestOpenFileForms(t *testing.T) {
	root := t.TempDir()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{root, "file://" + root, "file://localhost" + root, "file://" + root + "/"} {
		st, err := checkpoint.Open(context.Background(), url, checkpoint.Options{})
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		if _, err := st.Save(context.Background(), "job", dir, checkpoint.Manifest{}); err != nil {
			t.Fatalf("Save via %q: %v", url, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, "job"))
	if err != nil || len(entries) != 4 {
		t.Fatalf("%s/job holds %d entries (%v), want the 4 checkpoints", root, len(entries), err)
	}
	// No temporary files are left behind.
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".") {
			t.Errorf("left behind: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenCreateDir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "b")
	if _, err := checkpoint.Open(context.Background(), "file://"+root, checkpoint.Options{}); err == nil {
		t.Fatalf("Open of a missing directory without CreateDir succeeded")
	}
	if _, err := checkpoint.Open(context.Background(), "file://"+root, checkpoint.Options{CreateDir: true}); err != nil {
		t.Fatalf("Open with CreateDir: %v", err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		t.Fatalf("%s not created: %v", root, err)
	}
}

func TestReadStep(t *testing.T) {
	cases := map[string]struct {
		files   map[string]string
		want    *int64
		wantErr bool
	}{
		"none":                 {files: map[string]string{"x": "1"}},
		"step file":            {files: map[string]string{"step": "12\n"}, want: ptr(12)},
		"workload manifest":    {files: map[string]string{"manifest.json": `{"step": 5, "loss": 0.1}`}, want: ptr(5)},
		"step file first":      {files: map[string]string{"step": "3", "manifest.json": `{"step": 5}`}, want: ptr(3)},
		"manifest, no step":    {files: map[string]string{"manifest.json": `{"loss": 0.1}`}},
		"step not a number":    {files: map[string]string{"step": "twelve"}, wantErr: true},
		"negative step":        {files: map[string]string{"step": "-1"}, wantErr: true},
		"fractional step":      {files: map[string]string{"manifest.json": `{"step": 1.5}`}, wantErr: true},
		"manifest not JSON":    {files: map[string]string{"manifest.json": `step=5`}, wantErr: true},
		"manifest step string": {files: map[string]string{"manifest.json": `{"step": "5"}`}, wantErr: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for p, data := range c.files {
				if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := checkpoint.ReadStep(dir)
			if (err != nil) != c.wantErr {
				t.Fatalf("ReadStep: %v, want error %v", err, c.wantErr)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("ReadStep (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr(v int64) *int64 { return &v }

// A password in the store URL or the endpoint never reaches the error.
func TestOpenErrorsHidePasswords(t *testing.T) {
	cases := map[string]struct {
		url  string
		opts checkpoint.Options
	}{
		"user info":             {url: "s3://AKID:s3cret-pw@bucket/p"},
		"malformed user info":   {url: "s3://AKID:s3cret%zz-pw@bucket/p"},
		"endpoint with a user":  {url: "s3://b/p", opts: checkpoint.Options{Endpoint: "ftp://AKID:s3cret-pw@minio:9000"}},
		"malformed endpoint pw": {url: "s3://b/p", opts: checkpoint.Options{Endpoint: "http://AKID:s3cret/-pw@minio:9000"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := checkpoint.Open(context.Background(), c.url, c.opts)
			if !errors.Is(err, checkpoint.ErrInvalid) {
				t.Fatalf("Open(%q) = %v, want ErrInvalid", c.url, err)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "-pw") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}
