package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/client"
)

// printProgress is one line of a waiting command's progress on stderr, as
// `kubectl rollout status` prints: the time, the phase and why.
func printProgress(w io.Writer, st client.JobStatus, now time.Time) {
	why := st.Reason
	if st.Waiting != nil {
		why = "waits: " + st.Waiting.String()
	}
	if why != "" {
		why = ": " + why
	}
	fmt.Fprintf(w, "%s job %s %s, attempt %d%s\n", now.Local().Format(time.TimeOnly), st.JobID, st.Phase, st.Attempt, why)
}

func newDrainCmd(a *app) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Cordon a node and move every job on it elsewhere",
		Long: `Cordon the node and ask every job running on it to stop and requeue (no
retry spent; a checkpointing job saves first). Unless --wait=false, wait
until none of them holds GPUs on the node any more, printing on stderr the
jobs still there each time that changes, for at most --timeout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			return a.withClient(cmd, "text", func(ctx context.Context, cl *client.Client) error {
				jobs, err := cl.Drain(ctx, node)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if len(jobs) == 0 {
					fmt.Fprintf(out, "node %s cordoned; no jobs were running on it\n", node)
					return nil
				}
				fmt.Fprintf(out, "node %s cordoned; jobs asked to stop and requeue: %s\n", node, strings.Join(jobs, ", "))
				if !wait {
					return nil
				}
				wctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				err = cl.WaitDrained(wctx, node, jobs, time.Second, func(left []string) {
					if len(left) > 0 {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s node %s: jobs still on it: %s\n",
							time.Now().Format(time.TimeOnly), node, strings.Join(left, ", "))
					}
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "node %s drained\n", node)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the jobs have left the node")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the jobs to leave")
	return cmd
}
