package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/config"
)

func newCostCmd(a *app) *cobra.Command {
	var by, since, until, output string
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "GPU-hours and dollars per team, project or pool: on-prem, spot, on-demand",
		Long: `Report GPU-hours and dollars from the usage ledger, one row per team, project
or pool, split into on-prem, spot and on-demand, with what spot saved against
on-demand prices and a total. The ledger (--ledger) holds the runs that
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
			q, err := accounting.ParseQuery(by, since, until, time.Now())
			if err != nil {
				return fmt.Errorf("--%w", err)
			}
			if err := checkCostOutput(output); err != nil {
				return err
			}
			if err := a.setup(cmd, false, false); err != nil {
				return err
			}
			ctx := cmd.Context()
			ledger, err := openLedger(ctx, a.cfg.Ledger.DSN, true)
			if err != nil {
				return err
			}
			defer ledger.Close()
			// A spot pool without an on-demand price reports its savings as
			// unknown. The servers publish their pools' offers; the
			// config's own prices win.
			running, offers, err := fromView(ctx, a.cfg.Redis, time.Now())
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: runs in flight and cloud pools' on-demand prices are not counted: %v\n", err)
			}
			q.Running = running
			q.OnDemandPrices = accounting.OnDemandPrices(offers, a.cfg.Cloud.OnDemandPrices())
			sum, err := ledger.Report(ctx, q)
			if err != nil {
				return err
			}
			return printCost(cmd.OutOrStdout(), output, sum)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&by, "by", "team", "one row per team, project or pool")
	fl.StringVar(&since, "since", "7d", "start of the window: a duration ago (7d, 36h), an RFC 3339 time or a date")
	fl.StringVar(&until, "until", "", "end of the window, like --since (default now)")
	fl.StringVarP(&output, "output", "o", "table", "output format: table, csv or json")
	ledgerFlag(fl, &a.cfg.Ledger)
	return cmd
}

// fromView reads what the Redis view adds to the ledger: the cost so far of
// the runs that hold GPUs now (their allocations, up to now), and the cloud
// offers the servers publish.
func fromView(ctx context.Context, rc config.RedisConfig, now time.Time) ([]gangway.UsageSegment, []gangway.Offer, error) {
	rdb, err := rc.Dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer rdb.Close()
	v := capacity.New(rdb, capacity.Options{Prefix: rc.Prefix})
	running, err := v.Allocations(ctx)
	if err != nil {
		return nil, nil, err
	}
	offers, err := v.CloudOffers(ctx)
	if err != nil {
		return nil, nil, err
	}
	return accounting.RunningSegments(running, now), offers, nil
}

func checkCostOutput(v string) error {
	switch v {
	case "table", "text", "csv", "json":
		return nil
	}
	return fmt.Errorf("--output: want table, csv or json, got %q", v)
}

func printCost(w io.Writer, output string, sum accounting.Summary) error {
	switch output {
	case "json":
		return printJSON(w, sum)
	case "csv":
		return sum.WriteCSV(w)
	}
	return sum.WriteText(w)
}
