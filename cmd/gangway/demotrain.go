package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/agent"
)

// demoTrainOptions are demo-train's flags.
type demoTrainOptions struct {
	steps, failAt, checkpointEvery int
	stepTime                       time.Duration
	checkpointSize                 int64
}

func (o demoTrainOptions) validate() error {
	switch {
	case o.steps < 1:
		return fmt.Errorf("--steps: must be at least 1, got %d", o.steps)
	case o.checkpointEvery < 0:
		return fmt.Errorf("--checkpoint-every: must not be negative, got %d", o.checkpointEvery)
	case o.checkpointSize < 0:
		return fmt.Errorf("--checkpoint-size: must not be negative, got %d", o.checkpointSize)
	case o.stepTime <= 0:
		return fmt.Errorf("--step-time: must be positive, got %v", o.stepTime)
	}
	return nil
}

// demoEnv is the workload contract as demo-train reads it.
type demoEnv struct {
	jobID, attempt, rank, worldSize, masterAddr, gpus string
	checkpointDir, resumeDir                          string
}

func demoEnvFromOS() demoEnv {
	return demoEnv{jobID: os.Getenv("GANGWAY_JOB_ID"), attempt: os.Getenv("GANGWAY_ATTEMPT"),
		rank: os.Getenv("GANGWAY_RANK"), worldSize: os.Getenv("GANGWAY_WORLD_SIZE"),
		masterAddr: os.Getenv("GANGWAY_MASTER_ADDR"), gpus: os.Getenv("CUDA_VISIBLE_DEVICES"),
		checkpointDir: os.Getenv("GANGWAY_CHECKPOINT_DIR"), resumeDir: os.Getenv("GANGWAY_RESUME_DIR")}
}

func newDemoTrainCmd() *cobra.Command {
	var o demoTrainOptions
	cmd := &cobra.Command{
		Use:   "demo-train",
		Short: "A stand-in training process: steps, sleeps, prints a falling loss, checkpoints",
		Long: `A real child process that "trains" by stepping and sleeping, and honours
Gangway's workload contract (docs/checkpointing.md). 'gangway dev' and the
tests run it as the job command.

It resumes from the step in $GANGWAY_RESUME_DIR/step, printing "resumed from
step S". Rank 0 (only) writes a checkpoint every --checkpoint-every steps
into $GANGWAY_CHECKPOINT_DIR/step-NNNNNNNNN/: a "step" file, --checkpoint-size
bytes of payload, and last the COMPLETE marker. On SIGTERM, SIGINT, SIGUSR1 or
SIGUSR2 it finishes nothing more, writes a final checkpoint of the last
completed step, prints "stopped: steps S..K" and exits 128 + the signal's
number (143 for SIGTERM): it did not finish. When it finishes it prints
"done: steps S..N": the steps this run did, so that the runs of a job add up
to every step exactly once. --fail-at-step makes it exit 3 at that step, to
exercise gang failure and retries.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
			defer signal.Stop(sigs)
			code, err := demoTrain(cmd.OutOrStdout(), o, demoEnvFromOS(), sigs)
			if err != nil {
				return err
			}
			if code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.steps, "steps", 50, "number of steps in all, counting those done before a resume")
	f.DurationVar(&o.stepTime, "step-time", 100*time.Millisecond, "time per step")
	f.IntVar(&o.failAt, "fail-at-step", 0, "exit 3 at this step (0: never)")
	f.IntVar(&o.checkpointEvery, "checkpoint-every", 0, "checkpoint every N steps (0: only when stopped)")
	f.Int64Var(&o.checkpointSize, "checkpoint-size", 0, "bytes of payload in each checkpoint")
	return cmd
}

// demoTrain runs the training loop and returns the exit code: 0 when done,
// 3 at --fail-at-step, 128 + signal when stopped by one of sigs.
func demoTrain(out io.Writer, o demoTrainOptions, env demoEnv, sigs <-chan os.Signal) (int, error) {
	fmt.Fprintf(out, "demo-train: job %s attempt %s rank %s/%s master %s gpus [%s]\n",
		env.jobID, env.attempt, env.rank, env.worldSize, env.masterAddr, env.gpus)
	start := 0
	if env.resumeDir != "" {
		step, err := checkpoint.ReadStep(env.resumeDir)
		if err != nil {
			return 0, fmt.Errorf("resume: %w", err)
		}
		if step == nil {
			return 0, fmt.Errorf("resume: %s holds no step file", env.resumeDir)
		}
		start = int(*step)
		fmt.Fprintf(out, "demo-train: resumed from step %d\n", start)
	}
	// Data-parallel replicas hold the same state: rank 0 saves it.
	ckpt := demoCheckpointer{dir: env.checkpointDir, size: o.checkpointSize, last: start}
	if env.rank != "" && env.rank != "0" {
		ckpt.dir = ""
	}

	t := time.NewTicker(o.stepTime)
	defer t.Stop()
	every := max(o.steps/10, 1)
	for step := start + 1; step <= o.steps; step++ {
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
		if step == o.failAt {
			fmt.Fprintf(out, "demo-train: failing at step %d as asked\n", step)
			return 3, nil
		}
		if step%every == 0 || step == o.steps {
			fmt.Fprintf(out, "step %d/%d loss %.4f\n", step, o.steps, 2.5*math.Exp(-3*float64(step)/float64(o.steps)))
		}
		if o.checkpointEvery > 0 && step%o.checkpointEvery == 0 && step < o.steps {
			if err := ckpt.save(step); err != nil {
				return 0, err
			}
		}
	}
	fmt.Fprintf(out, "done: %s\n", stepRange(start+1, o.steps))
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

// demoCheckpointer writes checkpoints as docs/checkpointing.md says:
// a new subdirectory, its files written and synced, the marker last.
type demoCheckpointer struct {
	dir  string // "" when this rank does not checkpoint
	size int64
	last int // the newest step saved (or resumed from)
}

func (c *demoCheckpointer) save(step int) error {
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
