package demotrain

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/agent"
)

// Options shape a run: how many steps in all (counting those done before a
// resume), the time per step, the step to fail at (0: never), and the
// checkpoint interval (0: only when stopped) and payload size.
type Options struct {
	Steps, FailAt, CheckpointEvery int
	StepTime                       time.Duration
	CheckpointSize                 int64
}

// Validate checks the options, naming each by its demo-train flag.
func (o Options) Validate() error {
	switch {
	case o.Steps < 1:
		return fmt.Errorf("--steps: must be at least 1, got %d", o.Steps)
	case o.CheckpointEvery < 0:
		return fmt.Errorf("--checkpoint-every: must not be negative, got %d", o.CheckpointEvery)
	case o.CheckpointSize < 0:
		return fmt.Errorf("--checkpoint-size: must not be negative, got %d", o.CheckpointSize)
	case o.StepTime <= 0:
		return fmt.Errorf("--step-time: must be positive, got %v", o.StepTime)
	}
	return nil
}

// Env is the workload contract as the process reads it.
type Env struct {
	JobID, Attempt, Rank, WorldSize, MasterAddr, GPUs string
	CheckpointDir, ResumeDir                          string
}

// EnvFromOS reads the contract from the environment the agent set.
func EnvFromOS() Env {
	return Env{JobID: os.Getenv("GANGWAY_JOB_ID"), Attempt: os.Getenv("GANGWAY_ATTEMPT"),
		Rank: os.Getenv("GANGWAY_RANK"), WorldSize: os.Getenv("GANGWAY_WORLD_SIZE"),
		MasterAddr: os.Getenv("GANGWAY_MASTER_ADDR"), GPUs: os.Getenv("CUDA_VISIBLE_DEVICES"),
		CheckpointDir: os.Getenv("GANGWAY_CHECKPOINT_DIR"), ResumeDir: os.Getenv("GANGWAY_RESUME_DIR")}
}

// Run runs the training loop and returns the exit code: 0 when done, 3 at
// o.FailAt, 128 + signal when stopped by one of sigs.
func Run(out io.Writer, o Options, env Env, sigs <-chan os.Signal) (int, error) {
	fmt.Fprintf(out, "demo-train: job %s attempt %s rank %s/%s master %s gpus [%s]\n",
		env.JobID, env.Attempt, env.Rank, env.WorldSize, env.MasterAddr, env.GPUs)
	start := 0
	if env.ResumeDir != "" {
		step, err := checkpoint.ReadStep(env.ResumeDir)
		if err != nil {
			return 0, fmt.Errorf("resume: %w", err)
		}
		if step == nil {
			return 0, fmt.Errorf("resume: %s holds no step file", env.ResumeDir)
		}
		start = int(*step)
		fmt.Fprintf(out, "demo-train: resumed from step %d\n", start)
	}
	// Data-parallel replicas hold the same state: rank 0 saves it.
	ckpt := checkpointer{dir: env.CheckpointDir, size: o.CheckpointSize, last: start}
	if env.Rank != "" && env.Rank != "0" {
		ckpt.dir = ""
	}

	t := time.NewTicker(o.StepTime)
	defer t.Stop()
	every := max(o.Steps/10, 1)
	for step := start + 1; step <= o.Steps; step++ {
		select {
		case s := <-sigs:
			done := step - 1
			fmt.Fprintf(out, "demo-train: %v at step %d; stopping\n", s, done)
			if err := ckpt.save(done); err != nil {
				fmt.Fprintf(out, "demo-train: final checkpoint failed: %v\n", err)
			}
			fmt.Fprintf(out, "stopped: %s\n", stepRange(start+1, done))
			return 128 + signalNumber(s), nil
		case <-t.C:
		}
		if step == o.FailAt {
			fmt.Fprintf(out, "demo-train: failing at step %d as asked\n", step)
			return 3, nil
		}
		if step%every == 0 || step == o.Steps {
			fmt.Fprintf(out, "step %d/%d loss %.4f\n", step, o.Steps, 2.5*math.Exp(-3*float64(step)/float64(o.Steps)))
		}
		if o.CheckpointEvery > 0 && step%o.CheckpointEvery == 0 && step < o.Steps {
			if err := ckpt.save(step); err != nil {
				return 0, err
			}
		}
	}
	fmt.Fprintf(out, "done: %s\n", stepRange(start+1, o.Steps))
	fmt.Fprintln(out, "demo-train: done")
	return 0, nil
}

// stepRange is "steps S..K", or "no steps" when the run did none.
func stepRange(from, to int) string {
	if to < from {
		return "no steps"
	}
	return fmt.Sprintf("steps %d..%d", from, to)
}

func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGTERM)
}

// checkpointer writes checkpoints as docs/checkpointing.md says:
// a new subdirectory, its files written and synced, the marker last.
type checkpointer struct {
	dir  string // "" when this rank does not checkpoint
	size int64
	last int // the newest step saved (or resumed from)
}

func (c *checkpointer) save(step int) error {
	if c.dir == "" || step <= c.last {
		return nil
	}
	dir := filepath.Join(c.dir, fmt.Sprintf("step-%09d", step))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := writeSynced(filepath.Join(dir, checkpoint.StepFile), []byte(strconv.Itoa(step)+"\n"), 0); err != nil {
		return err
	}
	if c.size > 0 {
		if err := writeSynced(filepath.Join(dir, "payload.bin"), nil, c.size); err != nil {
			return err
		}
	}
	if err := writeSynced(filepath.Join(dir, agent.CompleteMarker), nil, 0); err != nil {
		return err
	}
	c.last = step
	return nil
}

// writeSynced writes data, or size zero bytes, to path and syncs it.
func writeSynced(path string, data []byte, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	err = func() error {
		if _, err := f.Write(data); err != nil {
			return err
		}
		chunk := make([]byte, min(size, 1<<20))
		for left := size; left > 0; left -= int64(len(chunk)) {
			if _, err := f.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
				return err
			}
		}
		return f.Sync()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}
