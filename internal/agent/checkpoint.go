package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/workflows"
)

// The checkpoint side of the workload contract (docs/checkpointing.md).
//
// Every task gets a fresh directory of its own under
// DataDir/tasks/<job>/attempt-<n>-rank-<r>/:
//
//	checkpoint/   GANGWAY_CHECKPOINT_DIR: the workload writes checkpoints here
//	resume/       GANGWAY_RESUME_DIR: the checkpoint it resumes from, restored before start
//	uploading/    complete checkpoints the agent took over, until they are stored
//
// A checkpoint is a subdirectory of checkpoint/ that holds a file named
// CompleteMarker, created last. Rank 0's agent moves each complete one into
// uploading/, saves it to the store, prunes the job to its retention and
// deletes the local copy; other ranks' complete checkpoints are deleted
// unsaved (data-parallel replicas hold the same state as rank 0).

// CompleteMarker is the file a workload creates, after every other file of
// a checkpoint subdirectory is written and closed, to say the checkpoint is
// complete. The agent ignores subdirectories without it and never uploads
// the marker itself.
const CompleteMarker = "COMPLETE"

// Defaults for the checkpoint settings of Config.
const (
	defaultCheckpointPoll = time.Second
	defaultUploadTimeout  = 10 * time.Minute
	// minUploadReserve is the least time kept for the final upload when a
	// cloud notice's deadline cuts the grace period short.
	minUploadReserve = 5 * time.Second
)

// CheckpointTransfer is one checkpoint saved to or restored from the store,
// as a CheckpointObserver sees it.
type CheckpointTransfer struct {
	Op      string // "save" or "restore"
	JobID   string
	Attempt int
	Rank    int
	// ID is the checkpoint's ID ("" when a save failed before it had one).
	ID    string
	Step  *int64
	Bytes int64
	// Duration is how long the transfer took.
	Duration time.Duration
	// Final is true for a save that began after the process was sent its
	// stop signal: the checkpoint a preemption, a drain, a fault or a
	// notice asked for.
	Final bool
	Err   error
}

// Checkpoint transfer operations.
const (
	OpSave    = "save"
	OpRestore = "restore"
)

// CheckpointObserver is told about every checkpoint transfer; the server
// wiring hooks Prometheus in here. It is called from the task's goroutines
// and must not block.
type CheckpointObserver interface {
	ObserveCheckpoint(CheckpointTransfer)
}

// taskDirs are one task's local directories.
type taskDirs struct {
	root       string
	checkpoint string // GANGWAY_CHECKPOINT_DIR
	resume     string // GANGWAY_RESUME_DIR when resuming
	uploading  string
}

func (a *Agent) taskDirs(in workflows.RunTaskInput) taskDirs {
	root := filepath.Join(a.cfg.DataDir, "tasks", in.JobID, fmt.Sprintf("attempt-%d-rank-%d", in.Attempt, in.Rank))
	return taskDirs{root: root, checkpoint: filepath.Join(root, "checkpoint"),
		resume: filepath.Join(root, "resume"), uploading: filepath.Join(root, "uploading")}
}

// prepare makes the directories fresh: whatever an earlier run of the same
// task left (an agent that crashed) is not this run's to upload. The
// checkpoint directory is the task user's alone; the folders above it can
// be passed through but not listed (isolate.go).
func (d taskDirs) prepare(u *taskUser) error {
	if err := os.RemoveAll(d.root); err != nil {
		return fmt.Errorf("task dir: %w", err)
	}
	for _, dir := range []string{filepath.Dir(filepath.Dir(d.root)), filepath.Dir(d.root), d.root} {
		if err := mkdirMode(dir, modeShared); err != nil {
			return fmt.Errorf("task dir: %w", err)
		}
	}
	for _, dir := range []string{d.checkpoint, d.uploading} {
		if err := mkdirMode(dir, modePrivate); err != nil {
			return fmt.Errorf("task dir: %w", err)
		}
	}
	if err := u.own(d.checkpoint, modePrivate); err != nil {
		return fmt.Errorf("task dir: %w", err)
	}
	return nil
}

// restore fills dirs.resume with checkpoint in.ResumeFrom. RunTask reports
// its errors as workflows.ErrTypeRestoreFailed: not the user's fault.
func (a *Agent) restore(ctx context.Context, in workflows.RunTaskInput, dirs taskDirs, u *taskUser, log *slog.Logger) error {
	store := a.cfg.Checkpoints
	if store == nil {
		return fmt.Errorf("resume from checkpoint %s of job %s: node %s has no checkpoint store configured",
			in.ResumeFrom, in.JobID, a.cfg.Node.ID)
	}
	start := time.Now()
	m, err := store.Restore(ctx, in.JobID, in.ResumeFrom, dirs.resume)
	t := CheckpointTransfer{Op: OpRestore, JobID: in.JobID, Attempt: in.Attempt, Rank: in.Rank,
		ID: in.ResumeFrom, Step: m.Step, Bytes: m.TotalBytes, Duration: time.Since(start), Err: err}
	a.observe(t)
	if err != nil {
		return fmt.Errorf("resume from checkpoint %s: %w", in.ResumeFrom, err)
	}
	if err := u.ownTree(dirs.resume); err != nil {
		return fmt.Errorf("resume from checkpoint %s: %w", in.ResumeFrom, err)
	}
	log.Info("checkpoint restored", "checkpoint", m.ID, "step", stepAttr(m.Step), "bytes", m.TotalBytes,
		"took", t.Duration.Round(time.Millisecond))
	return nil
}

func (a *Agent) observe(t CheckpointTransfer) {
	if a.cfg.CheckpointObserver != nil {
		a.cfg.CheckpointObserver.ObserveCheckpoint(t)
	}
}

func stepAttr(step *int64) any {
	if step == nil {
		return "none"
	}
	return *step
}

// uploader takes the complete checkpoints a task writes and, on rank 0,
// saves them to the store; on other ranks it deletes them.
type uploader struct {
	a     *Agent
	in    workflows.RunTaskInput
	dirs  taskDirs
	log   *slog.Logger
	store checkpoint.Store // nil: discard, do not save

	seq int // orders checkpoints taken over, oldest first
	// scanned is when takeOver last looked (at first, when the uploader
	// was made): a checkpoint it finds complete now was completed after
	// that, whatever its marker's time says. The workload writes the
	// marker, and a job must not look dearer to preempt by backdating it.
	scanned time.Time

	// stopping is set once the process is asked to stop: what it saves
	// from then on is its final checkpoint.
	stopping atomic.Bool

	mu       sync.Mutex
	newest   workflows.CheckpointRef
	lastTook time.Duration // the last save's duration, to reserve time for the final one

	stop chan struct{}
	done chan struct{}
}

// newUploader returns nil when the task does not checkpoint.
func (a *Agent) newUploader(in workflows.RunTaskInput, dirs taskDirs, log *slog.Logger) *uploader {
	if !in.Checkpoint {
		return nil
	}
	u := &uploader{a: a, in: in, dirs: dirs, log: log, stop: make(chan struct{}), done: make(chan struct{}), scanned: time.Now()}
	if in.Rank == 0 {
		u.store = a.cfg.Checkpoints
		if u.store == nil {
			log.Warn("the job checkpoints but this node has no checkpoint store; its checkpoints are discarded")
		}
	}
	return u
}

// markStopping records that the process was sent its stop signal.
func (u *uploader) markStopping() {
	if u != nil {
		u.stopping.Store(true)
	}
}

// progress is what the task's heartbeats carry.
func (u *uploader) progress() workflows.RunTaskProgress {
	if u == nil {
		return workflows.RunTaskProgress{}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return workflows.RunTaskProgress{Checkpoint: u.newest}
}

// reserve is how long the final save is expected to need.
func (u *uploader) reserve() time.Duration {
	if u == nil {
		return 0
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return max(minUploadReserve, 2*u.lastTook)
}

// start polls for complete checkpoints until finish is called. Saves run
// on ctx, which should outlive the activity's cancellation: a periodic
// save in flight when the task is stopped is still worth finishing.
func (u *uploader) start(ctx context.Context) {
	if u == nil {
		return
	}
	go func() {
		defer close(u.done)
		t := time.NewTicker(u.a.cfg.CheckpointPoll)
		defer t.Stop()
		for {
			select {
			case <-u.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				u.poll(ctx, u.stopping.Load())
			}
		}
	}()
}

// finish stops the polling, waits for a save in flight, and saves the
// newest checkpoint the stopped process left, within timeout (cut short by
// a notice's deadline). It must be called after the process is gone.
func (u *uploader) finish(ctx context.Context, timeout time.Duration) {
	if u == nil {
		return
	}
	close(u.stop)
	<-u.done
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if d := u.a.noticeDeadline(); !d.IsZero() {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, d)
		defer cancelDeadline()
	}
	u.poll(ctx, true)
}

// poll takes over every complete checkpoint, then saves the newest one
// waiting and drops the older ones, which it supersedes.
func (u *uploader) poll(ctx context.Context, final bool) {
	u.takeOver()
	pending, err := u.pending()
	if err != nil {
		u.log.Warn("checkpoint scan failed", "dir", u.dirs.uploading, "error", err)
		return
	}
	if len(pending) == 0 {
		return
	}
	newest := pending[len(pending)-1]
	for _, old := range pending[:len(pending)-1] {
		u.log.Info("checkpoint superseded before it was saved; dropping it", "dir", old)
		_ = os.RemoveAll(old)
	}
	if u.store == nil {
		_ = os.RemoveAll(newest)
		return
	}
	u.save(ctx, newest, final)
}

// takeOver moves complete checkpoints out of the workload's directory into
// uploading/, oldest first by their marker's time, so the workload can
// neither change nor delete them while they are saved.
func (u *uploader) takeOver() {
	began := time.Now()
	defer func() { u.scanned = began }()
	entries, err := os.ReadDir(u.dirs.checkpoint)
	if err != nil {
		u.log.Warn("checkpoint scan failed", "dir", u.dirs.checkpoint, "error", err)
		return
	}
	type complete struct {
		name string
		at   time.Time
	}
	var found []complete
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		fi, err := os.Stat(filepath.Join(u.dirs.checkpoint, e.Name(), CompleteMarker))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		found = append(found, complete{e.Name(), fi.ModTime()})
	}
	sort.Slice(found, func(i, j int) bool {
		if !found[i].at.Equal(found[j].at) {
			return found[i].at.Before(found[j].at)
		}
		return found[i].name < found[j].name
	})
	for _, c := range found {
		u.seq++
		dst := filepath.Join(u.dirs.uploading, fmt.Sprintf("%08d-%s", u.seq, c.name))
		if err := os.Rename(filepath.Join(u.dirs.checkpoint, c.name), dst); err != nil {
			u.log.Warn("cannot take over checkpoint", "dir", c.name, "error", err)
			continue
		}
		if err := os.Remove(filepath.Join(dst, CompleteMarker)); err != nil {
			u.log.Warn("cannot remove checkpoint marker", "dir", dst, "error", err)
		}
		// The directory keeps the marker's time, when the workload
		// finished writing, for save (takenAt): the work since the
		// checkpoint counts from then, not from when the upload starts
		// — but not from before the last look, which did not find it.
		at := c.at
		if at.Before(u.scanned) {
			at = u.scanned
		}
		if err := os.Chtimes(dst, at, at); err != nil {
			u.log.Warn("cannot keep the checkpoint's time", "dir", dst, "error", err)
		}
	}
}

// takenAt is when the workload finished writing the checkpoint in dir, an
// entry of uploading/: the time takeOver gave the directory. Zero when it
// cannot be read (the save then counts from its own start).
func takenAt(dir string) time.Time {
	fi, err := os.Stat(dir)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// pending lists uploading/, oldest first.
func (u *uploader) pending() ([]string, error) {
	entries, err := os.ReadDir(u.dirs.uploading)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(u.dirs.uploading, e.Name()))
		}
	}
	sort.Strings(dirs) // the sequence prefix orders them
	return dirs, nil
}

// save stores dir, prunes the job to its retention and deletes dir. A
// failed save leaves dir for the next poll.
func (u *uploader) save(ctx context.Context, dir string, final bool) {
	in := u.in
	start := time.Now()
	m, err := u.store.Save(ctx, in.JobID, dir, checkpoint.Manifest{Attempt: in.Attempt, Taken: takenAt(dir), Layout: checkpoint.Layout{
		Replicas: in.WorldSize, GPUsPerReplica: len(in.GPUs), GPUModel: u.a.cfg.Node.Model()}})
	took := time.Since(start)
	u.a.observe(CheckpointTransfer{Op: OpSave, JobID: in.JobID, Attempt: in.Attempt, Rank: in.Rank,
		ID: m.ID, Step: m.Step, Bytes: m.TotalBytes, Duration: took, Final: final, Err: err})
	if err != nil {
		if errors.Is(err, checkpoint.ErrInvalid) {
			// An empty or unreadable directory will not save next time
			// either.
			u.log.Warn("checkpoint cannot be saved; dropping it", "dir", dir, "error", err)
			_ = os.RemoveAll(dir)
			return
		}
		u.log.Warn("checkpoint save failed; the local copy is kept", "dir", dir, "final", final, "error", err)
		return
	}
	u.mu.Lock()
	u.newest = workflows.CheckpointRef{ID: m.ID, Step: m.Step, At: m.Captured(), Bytes: m.TotalBytes}
	u.lastTook = took
	u.mu.Unlock()
	u.log.Info("checkpoint saved", "checkpoint", m.ID, "step", stepAttr(m.Step), "bytes", m.TotalBytes,
		"files", len(m.Files), "took", took.Round(time.Millisecond), "final", final)
	// The dispatch loop prices moves and preemptions by the work since
	// the newest checkpoint; a record lost only makes the job look dearer.
	if err := u.a.cap.RecordCheckpoint(ctx, in.JobID, in.Attempt, m.Captured()); err != nil {
		u.log.Warn("cannot record the checkpoint in the view", "checkpoint", m.ID, "error", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		u.log.Warn("cannot remove the saved checkpoint's local copy", "dir", dir, "error", err)
	}
	keep := in.Keep
	if keep <= 0 {
		keep = gangway.DefaultKeep
	}
	if n, err := u.store.Prune(ctx, in.JobID, keep); err != nil {
		u.log.Warn("checkpoint prune failed", "keep", keep, "error", err)
	} else if n > 0 {
		u.log.Debug("checkpoints pruned", "removed", n, "keep", keep)
	}
}

// cleanup removes the task's directories once the task is over, unless a
// checkpoint could not be saved: that one stays on the node for a person
// to recover.
func (u *uploader) cleanup(dirs taskDirs, log *slog.Logger) {
	if u != nil && u.store != nil {
		if left, _ := u.pending(); len(left) > 0 {
			log.Warn("unsaved checkpoints are left on the node", "dirs", strings.Join(left, ", "))
			_ = os.RemoveAll(dirs.checkpoint)
			_ = os.RemoveAll(dirs.resume)
			return
		}
	}
	if err := os.RemoveAll(dirs.root); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("cannot remove the task directory", "dir", dirs.root, "error", err)
	}
}

// CheckpointMetrics feeds checkpoint transfers to Prometheus.
func CheckpointMetrics(m *metrics.Checkpoints) CheckpointObserver { return checkpointMetrics{m} }

type checkpointMetrics struct{ m *metrics.Checkpoints }

func (c checkpointMetrics) ObserveCheckpoint(t CheckpointTransfer) {
	c.m.Transfer(t.Op, t.Final, t.Bytes, t.Duration, t.Err != nil)
}
