package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/checkpoint"
)

// Fixture is one backend under test, over storage that starts empty and
// that only the calling test uses.
type Fixture struct {
	// Open opens a store on the fixture's storage with opts (the suite
	// sets the clock, hooks and a small part size; the fixture adds what
	// its backend needs). Each call opens the same storage, as separate
	// agents sharing one location would.
	Open func(t *testing.T, opts checkpoint.Options) checkpoint.Store
	// Put writes data at key, bypassing the store. key is slash-separated
	// and relative to the store's root: <job>/<id>/files/<path> for a
	// checkpoint's file, <job>/<id>/manifest.json for its manifest.
	Put func(t *testing.T, key string, data []byte)
	// Remove deletes the object at key, bypassing the store.
	Remove func(t *testing.T, key string)
}

// bigSize is the "few MB" file of the round trip: larger than the 5 MiB
// part size the suite sets, so S3 backends take the multipart path.
const bigSize = 6<<20 + 12345

// Run holds the stores newFixture makes to the checkpoint.Store contract.
// newFixture is called once per case.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	cases := []struct {
		name string
		test func(t *testing.T, s *suite)
	}{
		{"RoundTrip", testRoundTrip},
		{"Step", testStep},
		{"NewestFirst", testNewestFirst},
		{"CorruptFile", testCorruptFile},
		{"CorruptManifest", testCorruptManifest},
		{"NewerFormat", testNewerFormat},
		{"InterruptedSave", testInterruptedSave},
		{"ManifestlessUpload", testManifestlessUpload},
		{"Retention", testRetention},
		{"JobsIsolated", testJobsIsolated},
		{"ConcurrentSaves", testConcurrentSaves},
		{"NotFound", testNotFound},
		{"Invalid", testInvalid},
		{"CancelBeforeSave", testCancelBeforeSave},
		{"CancelBeforeCommit", testCancelBeforeCommit},
		{"Delete", testDelete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &suite{fx: newFixture(t), clock: &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}}
			s.store = s.open(t, nil)
			c.test(t, s)
		})
	}
}

type suite struct {
	fx    Fixture
	clock *clock
	store checkpoint.Store
}

// open opens another store on the case's storage, sharing its clock.
func (s *suite) open(t *testing.T, beforeCommit func(context.Context, checkpoint.Manifest) error) checkpoint.Store {
	t.Helper()
	return s.fx.Open(t, checkpoint.Options{
		PartSize:     5 << 20,
		Now:          s.clock.Now,
		AbandonAfter: time.Hour,
		BeforeCommit: beforeCommit,
	})
}

// clock is a settable clock that moves on a millisecond per reading, so
// consecutive saves get distinct, ordered times.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	fixed bool
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fixed {
		c.now = c.now.Add(time.Millisecond)
	}
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fixed = true
}

// tree is a checkpoint directory's contents: slash path → data.
type tree map[string][]byte

// write creates a fresh directory holding tr.
func (tr tree) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range tr {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// digest compares file contents by length and SHA-256: cmp walks a
// []byte element by element, which takes seconds for a few megabytes.
var digest = cmp.Transformer("digest", func(b []byte) string {
	if len(b) <= 64 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
})

// files is what the manifest of tr must list.
func (tr tree) files() []checkpoint.File {
	var files []checkpoint.File
	for p, data := range tr {
		sum := sha256.Sum256(data)
		files = append(files, checkpoint.File{Path: p, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(files, func(a, b checkpoint.File) int { return strings.Compare(a.Path, b.Path) })
	return files
}

func (tr tree) total() int64 {
	var n int64
	for _, data := range tr {
		n += int64(len(data))
	}
	return n
}

// readTree reads every file under dir.
func readTree(t *testing.T, dir string) tree {
	t.Helper()
	tr := tree{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		tr[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return b
}

// small is a one-file checkpoint whose contents name it.
func small(label string) tree {
	return tree{"state.txt": []byte(label)}
}

func (s *suite) save(t *testing.T, job string, tr tree, m checkpoint.Manifest) checkpoint.Manifest {
	t.Helper()
	got, err := s.store.Save(context.Background(), job, tr.write(t), m)
	if err != nil {
		t.Fatalf("Save(%s): %v", job, err)
	}
	return got
}

func (s *suite) ids(t *testing.T, job string) []string {
	t.Helper()
	list, err := s.store.List(context.Background(), job)
	if err != nil {
		t.Fatalf("List(%s): %v", job, err)
	}
	ids := []string{}
	for _, m := range list {
		ids = append(ids, m.ID)
	}
	return ids
}

func (s *suite) latestID(t *testing.T, job string) string {
	t.Helper()
	m, err := s.store.Latest(context.Background(), job)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("Latest(%s): %v", job, err)
	}
	return m.ID
}

func (s *suite) restore(t *testing.T, job, id string) (tree, checkpoint.Manifest, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "resume")
	m, err := s.store.Restore(context.Background(), job, id, dir)
	if err != nil {
		if _, serr := os.Stat(dir); !errors.Is(serr, fs.ErrNotExist) {
			t.Errorf("Restore(%s, %s) failed (%v) but created %s", job, id, err, dir)
		}
		return nil, m, err
	}
	return readTree(t, dir), m, nil
}

func ptr[T any](v T) *T { return &v }

func testRoundTrip(t *testing.T, s *suite) {
	ctx := context.Background()
	tr := tree{
		"model.pt":                       randomBytes(1, bigSize),
		"optimizer/rank-0/shard.bin":     randomBytes(2, 70_000),
		"optimizer/rank-1/shard.bin":     randomBytes(3, 70_001),
		"optimizer/rank-1/empty":         {},
		"a/b/c/d/deep.json":              []byte(`{"lr": 0.001}`),
		"name with spaces & ünïcode.txt": []byte("hello"),
		"step":                           []byte("1200\n"),
	}
	taken := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	in := checkpoint.Manifest{Attempt: 2, Taken: taken, Layout: checkpoint.Layout{Replicas: 2, GPUsPerReplica: 8, GPUModel: "H100"}}
	saved, err := s.store.Save(ctx, "train-1", tr.write(t), in)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	want := checkpoint.Manifest{
		Format:     checkpoint.FormatVersion,
		ID:         saved.ID,
		Job:        "train-1",
		Attempt:    2,
		Step:       ptr[int64](1200),
		Created:    saved.Created,
		Taken:      taken,
		Layout:     in.Layout,
		Files:      tr.files(),
		TotalBytes: tr.total(),
	}
	if diff := cmp.Diff(want, saved); diff != "" {
		t.Errorf("Save returned manifest (-want +got):\n%s", diff)
	}
	if saved.ID == "" || saved.Created.IsZero() {
		t.Errorf("Save left ID %q or Created %v empty", saved.ID, saved.Created)
	}

	latest, err := s.store.Latest(ctx, "train-1")
	if err != nil {
		t.Fatalf("Latest: %v", err)
	}
	if diff := cmp.Diff(want, latest); diff != "" {
		t.Errorf("Latest (-want +got):\n%s", diff)
	}
	list, err := s.store.List(ctx, "train-1")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]checkpoint.Manifest{want}, list); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	for _, id := range []string{saved.ID, ""} {
		got, m, err := s.restore(t, "train-1", id)
		if err != nil {
			t.Fatalf("Restore(%q): %v", id, err)
		}
		if diff := cmp.Diff(want, m); diff != "" {
			t.Errorf("Restore(%q) manifest (-want +got):\n%s", id, diff)
		}
		if diff := cmp.Diff(tr, got, digest); diff != "" {
			t.Errorf("Restore(%q) tree (-want +got):\n%s", id, diff)
		}
	}

	// Into an existing empty directory, through another store on the same
	// storage (another node resuming the job).
	dir := t.TempDir()
	if _, err := s.open(t, nil).Restore(ctx, "train-1", saved.ID, dir); err != nil {
		t.Fatalf("Restore into an empty directory from a second store: %v", err)
	}
	if diff := cmp.Diff(tr, readTree(t, dir), digest); diff != "" {
		t.Errorf("restored tree (-want +got):\n%s", diff)
	}
}

func testStep(t *testing.T, s *suite) {
	cases := map[string]struct {
		files    tree
		step     *int64
		wantStep *int64
	}{
		"step file":              {files: tree{"step": []byte(" 42\n"), "w": []byte("x")}, wantStep: ptr[int64](42)},
		"workload manifest":      {files: tree{"manifest.json": []byte(`{"step": 7, "epoch": 1}`)}, wantStep: ptr[int64](7)},
		"step file wins":         {files: tree{"step": []byte("9"), "manifest.json": []byte(`{"step": 7}`)}, wantStep: ptr[int64](9)},
		"caller's step wins":     {files: tree{"step": []byte("9")}, step: ptr[int64](11), wantStep: ptr[int64](11)},
		"none reported":          {files: tree{"w": []byte("x")}},
		"manifest without step":  {files: tree{"manifest.json": []byte(`{"epoch": 1}`)}},
		"malformed report saves": {files: tree{"step": []byte("twelve"), "w": []byte("x")}},
		"step zero":              {files: tree{"step": []byte("0")}, wantStep: ptr[int64](0)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := s.save(t, "step-job", c.files, checkpoint.Manifest{Step: c.step})
			if diff := cmp.Diff(c.wantStep, m.Step); diff != "" {
				t.Errorf("Save step (-want +got):\n%s", diff)
			}
			latest, err := s.store.Latest(context.Background(), "step-job")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.wantStep, latest.Step); diff != "" {
				t.Errorf("Latest step (-want +got):\n%s", diff)
			}
		})
	}
}

func testNewestFirst(t *testing.T, s *suite) {
	var want []string
	for i := range 4 {
		m := s.save(t, "job", small(fmt.Sprint(i)), checkpoint.Manifest{Attempt: i / 2})
		want = append([]string{m.ID}, want...)
	}
	if diff := cmp.Diff(want, s.ids(t, "job")); diff != "" {
		t.Errorf("List IDs, newest first (-want +got):\n%s", diff)
	}
	if got := s.latestID(t, "job"); got != want[0] {
		t.Errorf("Latest = %s, want %s", got, want[0])
	}
	got, _, err := s.restore(t, "job", "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(small("3"), got, digest); diff != "" {
		t.Errorf("Restore latest (-want +got):\n%s", diff)
	}
}

func testCorruptFile(t *testing.T, s *suite) {
	big := randomBytes(7, 1<<20)
	flipped := bytes.Clone(big)
	flipped[len(flipped)/2] ^= 0x01
	cases := map[string]func(t *testing.T, key string){
		"one bit flipped": func(t *testing.T, key string) { s.fx.Put(t, key, flipped) },
		"truncated":       func(t *testing.T, key string) { s.fx.Put(t, key, big[:len(big)-1]) },
		"extended":        func(t *testing.T, key string) { s.fx.Put(t, key, append(bytes.Clone(big), 0)) },
		"emptied":         func(t *testing.T, key string) { s.fx.Put(t, key, nil) },
		"missing":         func(t *testing.T, key string) { s.fx.Remove(t, key) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			m := s.save(t, "job", tree{"ok.txt": []byte("fine"), "weights/big.bin": big}, checkpoint.Manifest{})
			damage(t, path.Join("job", m.ID, "files", "weights/big.bin"))
			_, _, err := s.restore(t, "job", m.ID)
			if !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Errorf("Restore of a damaged checkpoint: %v, want ErrCorrupt", err)
			}
		})
	}
}

func testCorruptManifest(t *testing.T, s *suite) {
	good := s.save(t, "job", small("good"), checkpoint.Manifest{})
	bad := s.save(t, "job", small("bad"), checkpoint.Manifest{})
	s.fx.Put(t, path.Join("job", bad.ID, "manifest.json"), []byte(`{"format": 1, "id": "`))

	if got := s.latestID(t, "job"); got != good.ID {
		t.Errorf("Latest with the newest manifest truncated = %q, want the older %s", got, good.ID)
	}
	if diff := cmp.Diff([]string{good.ID}, s.ids(t, "job")); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if _, _, err := s.restore(t, "job", bad.ID); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("Restore with a truncated manifest: %v, want ErrCorrupt", err)
	}
	// A manifest moved to another checkpoint's place does not verify there.
	other := s.save(t, "job", small("other"), checkpoint.Manifest{})
	s.fx.Put(t, path.Join("job", other.ID, "manifest.json"), manifestJSON(t, good))
	if got := s.latestID(t, "job"); got != good.ID {
		t.Errorf("Latest with a misplaced manifest = %q, want %s", got, good.ID)
	}
}

func manifestJSON(t *testing.T, m checkpoint.Manifest) []byte {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func testNewerFormat(t *testing.T, s *suite) {
	old := s.save(t, "job", small("old"), checkpoint.Manifest{})
	newer := s.save(t, "job", small("newer"), checkpoint.Manifest{})
	future := newer
	future.Format = checkpoint.FormatVersion + 1
	s.fx.Put(t, path.Join("job", newer.ID, "manifest.json"), manifestJSON(t, future))
	// Falling back to the older checkpoint would silently redo work; a
	// newer Gangway wrote this one, so say so.
	if _, err := s.store.Latest(context.Background(), "job"); !errors.Is(err, checkpoint.ErrFormat) {
		t.Errorf("Latest with a newer-format manifest: %v, want ErrFormat", err)
	}
	if _, _, err := s.restore(t, "job", newer.ID); !errors.Is(err, checkpoint.ErrFormat) {
		t.Errorf("Restore of a newer-format checkpoint: %v, want ErrFormat", err)
	}
	if _, _, err := s.restore(t, "job", old.ID); err != nil {
		t.Errorf("Restore of the older checkpoint by ID: %v", err)
	}
}

var errCrash = errors.New("simulated crash before commit")

func testInterruptedSave(t *testing.T, s *suite) {
	ctx := context.Background()
	first := s.save(t, "job", small("first"), checkpoint.Manifest{})

	var hooked checkpoint.Manifest
	crashing := s.open(t, func(_ context.Context, m checkpoint.Manifest) error {
		hooked = m
		return errCrash
	})
	_, err := crashing.Save(ctx, "job", small("second").write(t), checkpoint.Manifest{Attempt: 1})
	if !errors.Is(err, errCrash) {
		t.Fatalf("Save that crashes before commit: %v, want errCrash", err)
	}
	if len(hooked.Files) != 1 || hooked.ID == "" {
		t.Fatalf("BeforeCommit saw %+v, want the completed manifest", hooked)
	}
	if got := s.latestID(t, "job"); got != first.ID {
		t.Errorf("Latest after an interrupted save = %q, want the earlier %s", got, first.ID)
	}
	if diff := cmp.Diff([]string{first.ID}, s.ids(t, "job")); diff != "" {
		t.Errorf("List after an interrupted save (-want +got):\n%s", diff)
	}
	if _, _, err := s.restore(t, "job", hooked.ID); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Restore of the interrupted save: %v, want ErrNotFound", err)
	}

	// A save in progress (younger than AbandonAfter) is left alone by
	// Prune; once old enough it is collected.
	if n, err := s.store.Prune(ctx, "job", 1); err != nil || n != 0 {
		t.Errorf("Prune while the interrupted save is recent = %d, %v; want 0, nil", n, err)
	}
	s.clock.Advance(2 * time.Hour)
	if n, err := s.store.Prune(ctx, "job", 1); err != nil || n != 1 {
		t.Errorf("Prune once the interrupted save is abandoned = %d, %v; want 1, nil", n, err)
	}
	if got := s.latestID(t, "job"); got != first.ID {
		t.Errorf("Latest after pruning = %q, want %s", got, first.ID)
	}
}

func testManifestlessUpload(t *testing.T, s *suite) {
	first := s.save(t, "job", small("first"), checkpoint.Manifest{})
	// Files of a newer checkpoint, written straight to storage, with no
	// manifest: what an agent killed mid-upload leaves.
	newer := fmt.Sprintf("%020d-a1-0badc0de", s.clock.Now().Add(time.Minute).UnixNano())
	s.fx.Put(t, path.Join("job", newer, "files", "state.txt"), []byte("half"))
	s.fx.Put(t, path.Join("job", newer, "files", "more/state.bin"), []byte("half"))
	if got := s.latestID(t, "job"); got != first.ID {
		t.Errorf("Latest with a newer manifest-less upload = %q, want %s", got, first.ID)
	}
	if _, _, err := s.restore(t, "job", newer); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Restore of a manifest-less upload: %v, want ErrNotFound", err)
	}
	// Entries that are not checkpoint IDs are ignored, not errors.
	s.fx.Put(t, path.Join("job", "README", "x"), []byte("not a checkpoint"))
	if diff := cmp.Diff([]string{first.ID}, s.ids(t, "job")); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func testRetention(t *testing.T, s *suite) {
	ctx := context.Background()
	var ids []string // newest first
	for i := range 5 {
		ids = append([]string{s.save(t, "job", small(fmt.Sprint(i)), checkpoint.Manifest{}).ID}, ids...)
	}
	other := s.save(t, "other", small("x"), checkpoint.Manifest{})
	steps := []struct {
		keep        int
		wantRemoved int
		wantIDs     []string
	}{
		{keep: 10, wantRemoved: 0, wantIDs: ids},
		{keep: 2, wantRemoved: 3, wantIDs: ids[:2]},
		{keep: 2, wantRemoved: 0, wantIDs: ids[:2]}, // idempotent
		{keep: 1, wantRemoved: 1, wantIDs: ids[:1]},
	}
	for _, st := range steps {
		n, err := s.store.Prune(ctx, "job", st.keep)
		if err != nil || n != st.wantRemoved {
			t.Errorf("Prune(keep %d) = %d, %v; want %d, nil", st.keep, n, err, st.wantRemoved)
		}
		if diff := cmp.Diff(st.wantIDs, s.ids(t, "job")); diff != "" {
			t.Errorf("after Prune(keep %d) (-want +got):\n%s", st.keep, diff)
		}
	}
	got, _, err := s.restore(t, "job", "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(small("4"), got, digest); diff != "" {
		t.Errorf("Restore after pruning (-want +got):\n%s", diff)
	}
	for _, id := range ids[1:] {
		if _, _, err := s.restore(t, "job", id); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("Restore of pruned %s: %v, want ErrNotFound", id, err)
		}
	}
	if diff := cmp.Diff([]string{other.ID}, s.ids(t, "other")); diff != "" {
		t.Errorf("another job after pruning (-want +got):\n%s", diff)
	}
}

func testJobsIsolated(t *testing.T, s *suite) {
	ctx := context.Background()
	// "job" is a prefix of the others' names: stores must not match by
	// string prefix.
	jobs := []string{"job", "job-2", "jobs", "JOB"}
	saved := map[string]checkpoint.Manifest{}
	for _, j := range jobs {
		saved[j] = s.save(t, j, small(j), checkpoint.Manifest{})
	}
	for _, j := range jobs {
		if diff := cmp.Diff([]string{saved[j].ID}, s.ids(t, j)); diff != "" {
			t.Errorf("List(%s) (-want +got):\n%s", j, diff)
		}
		got, _, err := s.restore(t, j, "")
		if err != nil {
			t.Fatalf("Restore(%s): %v", j, err)
		}
		if diff := cmp.Diff(small(j), got, digest); diff != "" {
			t.Errorf("Restore(%s) (-want +got):\n%s", j, diff)
		}
	}
	if _, _, err := s.restore(t, "job-2", saved["job"].ID); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Restore of job's checkpoint under job-2: %v, want ErrNotFound", err)
	}
	if err := s.store.Delete(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.store.Prune(ctx, "jobs", 1); err != nil || n != 0 {
		t.Errorf("Prune(jobs) = %d, %v", n, err)
	}
	for _, j := range jobs[1:] {
		if got := s.latestID(t, j); got != saved[j].ID {
			t.Errorf("Latest(%s) after deleting job = %q, want %s", j, got, saved[j].ID)
		}
	}
}

func testConcurrentSaves(t *testing.T, s *suite) {
	// A frozen clock: IDs must differ even when every save reads the same
	// time, from one store and from several (agents on different nodes).
	s.clock.Freeze()
	stores := []checkpoint.Store{s.store, s.store, s.open(t, nil), s.open(t, nil)}
	dirs := make([]string, len(stores))
	for i := range stores {
		dirs[i] = small(fmt.Sprint(i)).write(t)
	}
	ids := make([]string, len(stores))
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() {
			m, err := st.Save(context.Background(), "job", dirs[i], checkpoint.Manifest{Attempt: 1})
			if err != nil {
				t.Errorf("concurrent Save %d: %v", i, err)
			}
			ids[i] = m.ID
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			t.Fatalf("concurrent saves got IDs %v, want distinct", ids)
		}
		seen[id] = true
	}
	if got := len(s.ids(t, "job")); got != len(stores) {
		t.Errorf("List after %d concurrent saves has %d", len(stores), got)
	}
	for i, id := range ids {
		got, _, err := s.restore(t, "job", id)
		if err != nil {
			t.Fatalf("Restore(%s): %v", id, err)
		}
		if diff := cmp.Diff(small(fmt.Sprint(i)), got, digest); diff != "" {
			t.Errorf("Restore of save %d (-want +got):\n%s", i, diff)
		}
	}
}

func testNotFound(t *testing.T, s *suite) {
	ctx := context.Background()
	saved := s.save(t, "other", small("x"), checkpoint.Manifest{})
	cases := map[string]func() error{
		"Latest of a job with none": func() error { _, err := s.store.Latest(ctx, "job"); return err },
		"Restore latest of none":    func() error { _, _, err := s.restore(t, "job", ""); return err },
		"Restore unknown ID": func() error {
			_, _, err := s.restore(t, "other", fmt.Sprintf("%020d-a0-00000000", 1))
			return err
		},
		"Restore malformed ID":   func() error { _, _, err := s.restore(t, "other", "../other"); return err },
		"Restore other job's ID": func() error { _, _, err := s.restore(t, "job", saved.ID); return err },
	}
	for name, call := range cases {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, checkpoint.ErrNotFound) {
				t.Errorf("got %v, want ErrNotFound", err)
			}
		})
	}
	list, err := s.store.List(ctx, "job")
	if err != nil || list == nil || len(list) != 0 {
		t.Errorf("List of a job with none = %#v, %v; want an empty list, nil", list, err)
	}
	if n, err := s.store.Prune(ctx, "job", 3); err != nil || n != 0 {
		t.Errorf("Prune of a job with none = %d, %v; want 0, nil", n, err)
	}
	if err := s.store.Delete(ctx, "job"); err != nil {
		t.Errorf("Delete of a job with none: %v", err)
	}
}

func testInvalid(t *testing.T, s *suite) {
	ctx := context.Background()
	good := small("x").write(t)
	empty := t.TempDir()
	if err := os.MkdirAll(filepath.Join(empty, "only", "dirs"), 0o755); err != nil {
		t.Fatal(err)
	}
	full := small("x").write(t)
	saved := s.save(t, "job", small("x"), checkpoint.Manifest{})
	cases := map[string]func() error{
		"Save empty job ID":      func() error { _, err := s.store.Save(ctx, "", good, checkpoint.Manifest{}); return err },
		"Save job ID with slash": func() error { _, err := s.store.Save(ctx, "a/b", good, checkpoint.Manifest{}); return err },
		"Save job ID ..":         func() error { _, err := s.store.Save(ctx, "..", good, checkpoint.Manifest{}); return err },
		"Save job ID dotfile":    func() error { _, err := s.store.Save(ctx, ".tmp", good, checkpoint.Manifest{}); return err },
		"Save missing directory": func() error {
			_, err := s.store.Save(ctx, "job", filepath.Join(empty, "nope"), checkpoint.Manifest{})
			return err
		},
		"Save directory of no files": func() error { _, err := s.store.Save(ctx, "job", empty, checkpoint.Manifest{}); return err },
		"Save negative attempt": func() error {
			_, err := s.store.Save(ctx, "job", good, checkpoint.Manifest{Attempt: -1})
			return err
		},
		"Save manifest of another job": func() error {
			_, err := s.store.Save(ctx, "job", good, checkpoint.Manifest{Job: "other"})
			return err
		},
		"Latest bad job ID":          func() error { _, err := s.store.Latest(ctx, "a/b"); return err },
		"List bad job ID":            func() error { _, err := s.store.List(ctx, ""); return err },
		"Restore into non-empty dir": func() error { _, err := s.store.Restore(ctx, "job", saved.ID, full); return err },
		"Restore bad job ID":         func() error { _, err := s.store.Restore(ctx, "../job", saved.ID, t.TempDir()); return err },
		"Prune keep 0":               func() error { _, err := s.store.Prune(ctx, "job", 0); return err },
		"Delete bad job ID":          func() error { return s.store.Delete(ctx, "a/b") },
	}
	for name, call := range cases {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, checkpoint.ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
		})
	}
	if diff := cmp.Diff([]string{saved.ID}, s.ids(t, "job")); diff != "" {
		t.Errorf("invalid calls changed the store (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(small("x"), readTree(t, full), digest); diff != "" {
		t.Errorf("Restore into a non-empty directory changed it (-want +got):\n%s", diff)
	}
}

func testCancelBeforeSave(t *testing.T, s *suite) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.store.Save(ctx, "job", small("x").write(t), checkpoint.Manifest{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Save with a cancelled context: %v, want context.Canceled", err)
	}
	if got := s.latestID(t, "job"); got != "" {
		t.Errorf("Latest after a cancelled save = %s, want none", got)
	}
}

func testCancelBeforeCommit(t *testing.T, s *suite) {
	first := s.save(t, "job", small("first"), checkpoint.Manifest{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The worst moment: every file is uploaded, the manifest is not.
	st := s.open(t, func(context.Context, checkpoint.Manifest) error { cancel(); return nil })
	tr := tree{"big.bin": randomBytes(9, 1<<20), "small": []byte("x")}
	_, err := st.Save(ctx, "job", tr.write(t), checkpoint.Manifest{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Save cancelled before commit: %v, want context.Canceled", err)
	}
	if got := s.latestID(t, "job"); got != first.ID {
		t.Errorf("Latest after a cancelled save = %q, want %s", got, first.ID)
	}
	// The cancelled save cleaned up after itself: nothing is left for
	// Prune to collect, however old.
	s.clock.Advance(48 * time.Hour)
	if n, err := s.store.Prune(context.Background(), "job", 1); err != nil || n != 0 {
		t.Errorf("Prune after a cancelled save = %d, %v; want 0, nil (nothing left behind)", n, err)
	}
}

func testDelete(t *testing.T, s *suite) {
	ctx := context.Background()
	for i := range 3 {
		s.save(t, "job", small(fmt.Sprint(i)), checkpoint.Manifest{})
	}
	s.fx.Put(t, path.Join("job", fmt.Sprintf("%020d-a0-00000000", 5), "files", "orphan"), []byte("x"))
	for range 2 { // idempotent
		if err := s.store.Delete(ctx, "job"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if got := s.latestID(t, "job"); got != "" {
			t.Errorf("Latest after Delete = %s, want none", got)
		}
		if diff := cmp.Diff([]string{}, s.ids(t, "job")); diff != "" {
			t.Errorf("List after Delete (-want +got):\n%s", diff)
		}
	}
	// The job can start over.
	m := s.save(t, "job", small("again"), checkpoint.Manifest{})
	if got := s.latestID(t, "job"); got != m.ID {
		t.Errorf("Latest after saving again = %q, want %s", got, m.ID)
	}
}
