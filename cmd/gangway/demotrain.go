package main

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func newDemoTrainCmd() *cobra.Command {
	var steps, failAt int
	var stepTime time.Duration
	cmd := &cobra.Command{
		Use:   "demo-train",
		Short: "A stand-in training process: steps, sleeps, prints a falling loss",
		Long: `A real child process that "trains" by stepping and sleeping, reading the
workload contract from the environment (GANGWAY_RANK, GANGWAY_WORLD_SIZE,
GANGWAY_MASTER_ADDR, CUDA_VISIBLE_DEVICES). 'gangway dev' and the tests run
it as the job command. --fail-at-step makes it exit 3 at that step, to
exercise gang failure and retries. On SIGTERM or SIGINT it stops at once and
exits 143.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if steps < 1 {
				return fmt.Errorf("--steps: must be at least 1, got %d", steps)
			}
			out := cmd.OutOrStdout()
			rank, world := os.Getenv("GANGWAY_RANK"), os.Getenv("GANGWAY_WORLD_SIZE")
			fmt.Fprintf(out, "demo-train: job %s attempt %s rank %s/%s master %s gpus [%s]\n",
				os.Getenv("GANGWAY_JOB_ID"), os.Getenv("GANGWAY_ATTEMPT"), rank, world,
				os.Getenv("GANGWAY_MASTER_ADDR"), os.Getenv("CUDA_VISIBLE_DEVICES"))
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
			defer signal.Stop(sigs)
			t := time.NewTicker(stepTime)
			defer t.Stop()
			every := max(steps/10, 1)
			for step := 1; step <= steps; step++ {
				select {
				case s := <-sigs:
					fmt.Fprintf(out, "demo-train: %v at step %d; stopping\n", s, step-1)
					os.Exit(143)
				case <-t.C:
				}
				if step == failAt {
					fmt.Fprintf(out, "demo-train: failing at step %d as asked\n", step)
					os.Exit(3)
				}
				if step%every == 0 || step == steps {
					fmt.Fprintf(out, "step %d/%d loss %.4f\n", step, steps, 2.5*math.Exp(-3*float64(step)/float64(steps)))
				}
			}
			fmt.Fprintln(out, "demo-train: done")
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&steps, "steps", 50, "number of steps")
	f.DurationVar(&stepTime, "step-time", 100*time.Millisecond, "time per step")
	f.IntVar(&failAt, "fail-at-step", 0, "exit 3 at this step (0: never)")
	return cmd
}
