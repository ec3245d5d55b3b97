package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/internal/demotrain"
)

func newDemoTrainCmd() *cobra.Command {
	var o demotrain.Options
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
			if err := o.Validate(); err != nil {
				return err
			}
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
			defer signal.Stop(sigs)
			code, err := demotrain.Run(cmd.OutOrStdout(), o, demotrain.EnvFromOS(), sigs)
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
	f.IntVar(&o.Steps, "steps", 50, "number of steps in all, counting those done before a resume")
	f.DurationVar(&o.StepTime, "step-time", 100*time.Millisecond, "time per step")
	f.IntVar(&o.FailAt, "fail-at-step", 0, "exit 3 at this step (0: never)")
	f.IntVar(&o.CheckpointEvery, "checkpoint-every", 0, "checkpoint every N steps (0: only when stopped)")
	f.Int64Var(&o.CheckpointSize, "checkpoint-size", 0, "bytes of payload in each checkpoint")
	return cmd
}
