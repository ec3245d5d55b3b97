package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
)

func newCostCmd(a *app) *cobra.Command {
	var by, since, until, output string
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "GPU-hours and dollars per team, project or pool: on-prem, spot, on-demand",
		Long: `Report GPU-hours and dollars from the usage ledger, through the user API: one
row per team, project or pool, split into on-prem, spot and on-demand, with
what spot saved against on-demand prices and a total. A user who is not an
admin sees its own teams' usage only. The server's ledger holds the runs that
ended; the runs still in flight are read from the Redis view and count up to
now, the cost so far (IN FLIGHT counts them). Without Redis the report still
comes, from the ledger alone, with a warning.

--since and --until take a duration ago (7d, 36h, 1d12h) or a time (RFC 3339,
or a date, read as UTC midnight). Runs that straddle a bound count only their
part inside the window. "Spot saved" is - (empty in CSV, null in JSON) where
the on-demand price of a pool with spot usage is not known.`,
		Example: `  gangway cost
  gangway cost --by project --since 30d
  gangway cost --by pool --since 2025-06-01 --until 2025-07-01 --output csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Bad flags are refused here, before the API is asked.
			if _, err := accounting.ParseQuery(by, since, until, time.Now()); err != nil {
				return fmt.Errorf("--%w", err)
			}
			if err := checkCostOutput(output); err != nil {
				return err
			}
			return a.withClient(cmd, "text", func(ctx context.Context, cl *client.Client) error {
				r, err := cl.Cost(ctx, client.CostQuery{By: by, Since: since, Until: until})
				if err != nil {
					return err
				}
				for _, w := range r.Warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
				}
				return printCost(cmd.OutOrStdout(), output, r.CostSummary)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&by, "by", "team", "one row per team, project or pool")
	fl.StringVar(&since, "since", accounting.DefaultSince, "start of the window: a duration ago (7d, 36h), an RFC 3339 time or a date")
	fl.StringVar(&until, "until", "", "end of the window, like --since (default now)")
	fl.StringVarP(&output, "output", "o", "table", "output format: table, csv or json")
	return cmd
}

func checkCostOutput(v string) error {
	switch v {
	case "table", "text", "csv", "json":
		return nil
	}
	return fmt.Errorf("--output: want table, csv or json, got %q", v)
}

func printCost(w io.Writer, output string, sum gangway.CostSummary) error {
	switch output {
	case "json":
		return printJSON(w, sum)
	case "csv":
		return sum.WriteCSV(w)
	}
	return sum.WriteText(w)
}
