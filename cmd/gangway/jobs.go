package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
)

// outputFlag adds --output text|json.
func outputFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVarP(v, "output", "o", "text", "output format: text or json")
}

func checkOutput(v string) error {
	if v != "text" && v != "json" {
		return fmt.Errorf("--output: want text or json, got %q", v)
	}
	return nil
}

// withClient is the common path of the job commands: check --output,
// make the user API's client from --api and the token, run f.
func (a *app) withClient(cmd *cobra.Command, output string, f func(ctx context.Context, cl *client.Client) error) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	token, err := a.cli.ResolveToken()
	if err != nil {
		return err
	}
	tlsConfig, err := a.cli.TLS()
	if err != nil {
		return err
	}
	cl, err := client.NewAPI(client.APIOptions{URL: a.cli.API, Token: token, TLS: tlsConfig})
	if err != nil {
		return fmt.Errorf("--api: %w", err)
	}
	defer cl.Close()
	err = f(cmd.Context(), cl)
	if token == "" && errors.Is(err, client.ErrUnauthenticated) {
		return fmt.Errorf("%w\n(no token given: set --token-file or GANGWAY_TOKEN_FILE; `gangway dev` prints one, an admin makes one with `gangway token create`)", err)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newSubmitCmd(a *app) *cobra.Command {
	var wait bool
	var output string
	cmd := &cobra.Command{
		Use:   "submit FILE",
		Short: "Submit a job spec (YAML; see docs/jobspec.md)",
		Long: `Validate the job spec in FILE ('-' for stdin) — on its own and against the
registered fleet — and start the job. A bad spec is rejected with every
problem named by field, and nothing is queued. The job's name is its ID:
submitting the same name again is refused, not a second job. While the
fleet view (Redis) does not answer, a valid spec is still accepted, with a
warning on stderr that it was not checked against the fleet.

With --wait, block until the job ends, printing each phase change (and
waiting reason) to stderr as it happens and the job's status to stdout at
the end; exit non-zero unless it Succeeded.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			data, err := readFileOrStdin(args[0])
			if err != nil {
				return err
			}
			// The server checks the spec against the site's job policy
			// (config jobs: loader variables, task users); here only what
			// needs no policy.
			spec, err := gangway.ParseJobSpec(data, gangway.AllowLoaderEnv())
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return a.withClient(cmd, output, func(ctx context.Context, cl *client.Client) error {
				id, err := cl.Submit(ctx, spec, client.SubmitOptions{
					Warn: func(msg string) { fmt.Fprintf(cmd.ErrOrStderr(), "gangway: warning: %s\n", msg) }})
				if err != nil {
					return err
				}
				if !wait {
					if output == "json" {
						return printJSON(cmd.OutOrStdout(), map[string]string{"jobId": id})
					}
					fmt.Fprintf(cmd.OutOrStdout(), "job %s submitted\n", id)
					return nil
				}
				st, err := cl.Wait(ctx, id, time.Second, func(st client.JobStatus) { printProgress(cmd.ErrOrStderr(), st, time.Now()) })
				if err != nil {
					return err
				}
				if err := printStatus(cmd.OutOrStdout(), output, client.JobStatus{Status: st}); err != nil {
					return err
				}
				if st.Phase != gangway.PhaseSucceeded {
					return fmt.Errorf("job %s ended %s: %s", id, st.Phase, st.Reason)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the job to finish and print its result")
	outputFlag(cmd, &output)
	return cmd
}

func readFileOrStdin(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job spec: %w", err)
	}
	return data, nil
}

func newStatusCmd(a *app) *cobra.Command {
	return readCmd(a, &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's phase, assignment, history and why it waits",
		Args:  cobra.ExactArgs(1),
	}, jobStatus, printStatus)
}

// readCmd is the shape of the commands that fetch one thing through the
// user API and print it in the --output format.
func readCmd[T any](a *app, cmd *cobra.Command, get func(*cobra.Command, *client.Client, []string) (T, error),
	print func(w io.Writer, output string, v T) error) *cobra.Command {
	var output string
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return a.withClient(cmd, output, func(_ context.Context, cl *client.Client) error {
			v, err := get(cmd, cl, args)
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), output, v)
		})
	}
	outputFlag(cmd, &output)
	return cmd
}

// jsonOrText prints v as JSON with --output json, else with text.
func jsonOrText[T any](text func(io.Writer, T) error) func(io.Writer, string, T) error {
	return func(w io.Writer, output string, v T) error {
		if output == "json" {
			return printJSON(w, v)
		}
		return text(w, v)
	}
}

// jobStatus asks for the job named by the first argument and says, one line
// each on stderr, what its status lacks because a service did not answer.
func jobStatus(cmd *cobra.Command, cl *client.Client, args []string) (client.JobStatus, error) {
	st, err := cl.Status(cmd.Context(), args[0])
	for _, u := range st.Unavailable {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", u)
	}
	return st, err
}

func printStatus(w io.Writer, output string, st client.JobStatus) error {
	if output == "json" {
		return printJSON(w, st)
	}
	return st.WriteText(w)
}

func newListCmd(a *app) *cobra.Command {
	return readCmd(a, &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first, with when each waiting job should start",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, cl *client.Client, _ []string) ([]client.ListedJob, error) {
		return cl.ListWaiting(cmd.Context())
	}, jsonOrText(func(w io.Writer, jobs []client.ListedJob) error { return client.WriteJobs(w, jobs, time.Now()) }))
}

func newCancelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job in any phase; its GPUs are freed",
		Long: `Cancel the job in whatever phase it is: its GPUs are freed and cloud
instances launched for it terminated. A job that has already ended is left
as it is, and the command fails saying how it ended; an unknown job fails
with "no job named JOB".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "text", func(ctx context.Context, cl *client.Client) error {
				if err := cl.Cancel(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cancel requested for job %s\n", args[0])
				return nil
			})
		},
	}
}

func newLogsCmd(a *app) *cobra.Command {
	var follow bool
	var output string
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print a job's output (all ranks, all attempts)",
		Long: `Print the job's output lines from the Redis log stream (the newest lines,
up to the stream cap; agents keep complete log files in their data dir).
With --follow, keep printing until the job ends or Ctrl-C. With --output
json, one JSON object per line (time, rank, attempt, text). An unknown job
is an error: no job named JOB.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, output, func(ctx context.Context, cl *client.Client) error {
				enc := json.NewEncoder(cmd.OutOrStdout())
				return cl.FollowLogs(ctx, args[0], follow, func(l gangway.LogLine) {
					if output == "json" {
						_ = enc.Encode(l)
						return
					}
					fmt.Fprintf(cmd.OutOrStdout(), "[attempt %d rank %d] %s\n", l.Attempt, l.Rank, l.Text)
				})
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the job ends")
	outputFlag(cmd, &output)
	return cmd
}

func newNodesCmd(a *app) *cobra.Command {
	var allGPUs bool
	cmd := readCmd(a, &cobra.Command{
		Use:   "nodes",
		Short: "List nodes, their GPUs, state, heartbeat age and the jobs on them",
		Long: `List nodes, their GPUs, state, heartbeat age and the jobs on them; then, GPU
by GPU, the ones fenced by a hardware fault, flaky or with a fault on record,
with the job on each and the last fault (--gpus: every GPU).`,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, cl *client.Client, _ []string) ([]client.Node, error) {
		return cl.Nodes(cmd.Context())
	}, jsonOrText(func(w io.Writer, nodes []client.Node) error { return client.WriteNodes(w, nodes, allGPUs, time.Now()) }))
	cmd.Flags().BoolVar(&allGPUs, "gpus", false, "list every GPU, not only the fenced, flaky or faulted ones")
	return cmd
}

func newWhyCmd(a *app) *cobra.Command {
	return readCmd(a, &cobra.Command{
		Use:   "why JOB",
		Short: "Say why a job is waiting (or where it runs, or how it ended)",
		Long: `Print the job's phase and, while it waits, the dispatch loop's last reason
for not placing it — typed, with numbers: quota, fragmentation, GPU model
unavailable, reserved GPUs, a reservation of its own with its start time,
preemption or defragmentation in progress (the jobs being moved for it and
what that costs), or never fits — and whether waiting helps; when it
should start (P50 and P90, from a forward simulation of the fleet through
the placement engine, calibrated against how earlier estimates did), the
jobs whose end frees what it needs, and its cheapest cloud option, priced
to completion. A job renting cloud capacity says why it burst: its on-prem
ETA against the expected cost of the offer. With --output json the reason
comes as fields under "waiting": reason, detail, retry, reservationStart,
reservedNodes, moving, moveLostGPUSeconds, eta {p50, p90, at, beyond,
cloud}, waitsFor and cloud {pool, capacityType, instanceType, instances,
pricePerGPUHour, expectedCost, expectedDuration, bursting, burstEnabled}.`,
		Args: cobra.ExactArgs(1),
	}, jobStatus, func(w io.Writer, output string, st client.JobStatus) error {
		return printWhy(w, output, st, time.Now())
	})
}

// printWhy is `gangway why`'s answer: the phase and, while the job waits,
// the dispatch loop's typed reason and estimate (JSON: their fields under
// "waiting").
func printWhy(w io.Writer, output string, st client.JobStatus, now time.Time) error {
	if output == "json" {
		return printJSON(w, map[string]any{
			"jobId": st.JobID, "phase": st.Phase, "attempt": st.Attempt, "waiting": st.Waiting, "reason": st.Reason})
	}
	return st.WriteWhy(w, now)
}

func newCordonCmd(a *app) *cobra.Command {
	return nodeStateCmd(a, "cordon NODE", "Stop new work from landing on a node (running jobs stay)",
		func(ctx context.Context, cl *client.Client, node string) (string, error) {
			return "node " + node + " cordoned", cl.Cordon(ctx, node)
		})
}

func newUncordonCmd(a *app) *cobra.Command {
	return nodeStateCmd(a, "uncordon NODE", "Make a cordoned node schedulable again",
		func(ctx context.Context, cl *client.Client, node string) (string, error) {
			return "node " + node + " uncordoned", cl.Uncordon(ctx, node)
		})
}

func newRemoveNodeCmd(a *app) *cobra.Command {
	cmd := nodeStateCmd(a, "remove-node NODE", "Take a node whose agent has stopped out of the fleet for good",
		func(ctx context.Context, cl *client.Client, node string) (string, error) {
			return "node " + node + " removed", cl.RemoveNode(ctx, node)
		})
	cmd.Long = `Take a node out of the fleet for good — decommissioned, renamed, its machine
gone: it is no longer listed, counted as capacity a job could ever fit on, or
offered work. Its agent must have stopped first (the node shows lost in
gangway nodes): a running agent registers its node again. A node a job still
holds GPUs of is refused: drain it first. Admins only. An agent started on it
later registers it anew.`
	return cmd
}

// nodeStateCmd is the shape of cordon, uncordon, drain and remove-node.
func nodeStateCmd(a *app, use, short string, do func(context.Context, *client.Client, string) (string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "text", func(ctx context.Context, cl *client.Client) error {
				msg, err := do(ctx, cl, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), msg)
				return nil
			})
		},
	}
}
