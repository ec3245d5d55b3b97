package demotrain

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// syncBuffer is an output demo-train writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// completeSteps lists the steps of the complete checkpoints in dir.
func completeSteps(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "COMPLETE")); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "step"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || e.Name() != fmt.Sprintf("step-%09d", n) {
			t.Fatalf("checkpoint %s holds step %q", e.Name(), b)
		}
		steps = append(steps, n)
	}
	return steps
}

var rangeLine = regexp.MustCompile(`(?m)^(done|stopped): steps (\d+)\.\.(\d+)$`)

// stepsRun reads the "done: steps S..N" or "stopped: steps S..K" line.
func stepsRun(t *testing.T, out string) (from, to int) {
	t.Helper()
	m := rangeLine.FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		t.Fatalf("want one done/stopped line in:\n%s", out)
	}
	from, _ = strconv.Atoi(m[0][2])
	to, _ = strconv.Atoi(m[0][3])
	return from, to
}

// TestDemoTrainStopAndResume: a run checkpoints every 5 steps, is stopped
// by SIGTERM, saves the last completed step; a second run resumes from it
// and finishes. Together they did every step exactly once.
func TestDemoTrainStopAndResume(t *testing.T) {
	ckptDir := t.TempDir()
	opts := Options{Steps: 10000, StepTime: time.Millisecond, CheckpointEvery: 5, CheckpointSize: 3000}
	env := Env{Rank: "0", CheckpointDir: ckptDir}
	sigs := make(chan os.Signal, 1)
	var out syncBuffer
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := Run(&out, opts, env, sigs)
		done <- result{code, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(completeSteps(t, ckptDir)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two checkpoints within 10s:\n%s", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	sigs <- syscall.SIGTERM
	r := <-done
	if r.err != nil || r.code != 143 {
		t.Fatalf("stopped run: exit %d, error %v, want 143", r.code, r.err)
	}
	first := out.String()
	from, last := stepsRun(t, first)
	if from != 1 || last < 10 || last >= opts.Steps {
		t.Fatalf("stopped run did steps %d..%d, want 1..K with 10 <= K < %d", from, last, opts.Steps)
	}
	var want []int
	for s := 5; s < last; s += 5 {
		want = append(want, s)
	}
	// The final checkpoint, unless the periodic one at a multiple of 5 is
	// already the last completed step: either way exactly one of step K.
	want = append(want, last)
	if diff := cmp.Diff(want, completeSteps(t, ckptDir)); diff != "" {
		t.Errorf("checkpoints (-want +got):\n%s", diff)
	}
	final := filepath.Join(ckptDir, fmt.Sprintf("step-%09d", last))
	if fi, err := os.Stat(filepath.Join(final, "payload.bin")); err != nil || fi.Size() != 3000 {
		t.Errorf("payload of the final checkpoint: %v, %v; want 3000 bytes", fi, err)
	}

	// The agent restores the checkpoint's contents into the resume dir.
	resume := filepath.Join(t.TempDir(), "resume")
	if err := os.Rename(final, resume); err != nil {
		t.Fatal(err)
	}
	opts.Steps = last + 7
	var out2 syncBuffer
	code, err := Run(&out2, opts, Env{Rank: "0", CheckpointDir: t.TempDir(), ResumeDir: resume}, nil)
	if err != nil || code != 0 {
		t.Fatalf("resumed run: exit %d, error %v\n%s", code, err, out2.String())
	}
	second := out2.String()
	if !strings.Contains(second, "demo-train: resumed from step "+strconv.Itoa(last)+"\n") {
		t.Errorf("resumed run does not say it resumed from step %d:\n%s", last, second)
	}
	from2, to2 := stepsRun(t, second)
	if from2 != last+1 || to2 != opts.Steps {
		t.Errorf("resumed run did steps %d..%d, want %d..%d: none lost, none twice", from2, to2, last+1, opts.Steps)
	}
}

func TestDemoTrainOtherRanksDoNotCheckpoint(t *testing.T) {
	dir := t.TempDir()
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGUSR1 // stopped before its first step
	var out syncBuffer
	code, err := Run(&out, Options{Steps: 10, StepTime: time.Millisecond, CheckpointEvery: 1},
		Env{Rank: "1", CheckpointDir: dir}, sigs)
	if err != nil || code != 128+int(syscall.SIGUSR1) {
		t.Fatalf("exit %d, error %v; want %d", code, err, 128+int(syscall.SIGUSR1))
	}
	if !strings.Contains(out.String(), "stopped: no steps\n") {
		t.Errorf("output:\n%s", out.String())
	}
	if got := completeSteps(t, dir); len(got) != 0 {
		t.Errorf("rank 1 wrote checkpoints %v", got)
	}
}

// TestRunFromEnv runs with the contract in the environment: it resumes,
// checkpoints on schedule and counts its steps.
func TestRunFromEnv(t *testing.T) {
	resume, ckptDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(resume, "step"), []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GANGWAY_RANK", "0")
	t.Setenv("GANGWAY_CHECKPOINT_DIR", ckptDir)
	t.Setenv("GANGWAY_RESUME_DIR", resume)
	var out syncBuffer
	code, err := Run(&out, Options{Steps: 12, StepTime: time.Millisecond, CheckpointEvery: 3}, EnvFromOS(), nil)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, error %v\n%s", code, err, out.String())
	}
	for _, want := range []string{"demo-train: resumed from step 4\n", "done: steps 5..12\n", "demo-train: done\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if diff := cmp.Diff([]int{6, 9}, completeSteps(t, ckptDir)); diff != "" {
		t.Errorf("checkpoints (-want +got):\n%s", diff)
	}
}
