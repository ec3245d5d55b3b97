package gangway

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteText writes the summary as `gangway cost` shows it: a table, one row
// per group and a total, with notes on unknown savings and runs in flight.
func (sum CostSummary) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Usage by %s from %s to %s\n\n", sum.By, FormatTime(sum.Since), FormatTime(sum.Until))
	groups := make([]string, len(sum.Rows))
	width := max(len(sum.By), len("TOTAL"))
	for i, r := range sum.Rows {
		groups[i] = r.Group
		if groups[i] == "" {
			groups[i] = "(none)"
		}
		width = max(width, len(groups[i]))
	}
	// Numbers align right; the group column is padded so it reads left,
	// and the padding tabwriter puts before it is cut off.
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tGPU-H ON-PREM\tGPU-H SPOT\tGPU-H ON-DEMAND\t$ ON-PREM\t$ SPOT\t$ ON-DEMAND\t$ TOTAL\tSPOT SAVED\tIN FLIGHT\t\n", width, strings.ToUpper(string(sum.By)))
	// Money as Gangway shows it everywhere, the columns' "$" aside.
	money := func(v float64) string { return strings.TrimPrefix(FormatDollars(v), "$") }
	row := func(group string, r CostRow) {
		saved := "-"
		if r.SpotSavedDollars != nil {
			saved = money(*r.SpotSavedDollars)
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", width, group,
			cell(r.GPUHours.OnPrem, 1), cell(r.GPUHours.Spot, 1), cell(r.GPUHours.OnDemand, 1),
			money(r.Dollars.OnPrem), money(r.Dollars.Spot), money(r.Dollars.OnDemand), money(r.TotalDollars), saved, r.InFlight)
	}
	unknown := false
	for i, r := range sum.Rows {
		row(groups[i], r)
		unknown = unknown || r.SpotSavedDollars == nil
	}
	row("TOTAL", sum.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimPrefix(line, "  ")); err != nil {
			return err
		}
	}
	if unknown {
		fmt.Fprintln(w, "\nSPOT SAVED is - where the on-demand price of a pool with spot usage is unknown.")
	}
	if sum.Total.InFlight > 0 {
		fmt.Fprintf(w, "\nIN FLIGHT counts runs still going (%d in all): their GPU-hours and dollars are the cost so far.\n", sum.Total.InFlight)
	}
	return nil
}

// cell formats one of the table's GPU-hour counts to decimals places, or,
// where that would print a nonzero amount as zero (a few GPU-minutes), to
// its first two significant digits: usage that happened never reads as
// none. Dollars are FormatDollars'.
func cell(v float64, decimals int) string {
	zero := func(s string) bool { return strings.Trim(s, "-0.") == "" }
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	for d := decimals + 1; v != 0 && zero(s) && d <= 6; d++ {
		if t := strconv.FormatFloat(v, 'f', d, 64); !zero(t) {
			return strconv.FormatFloat(v, 'f', d+1, 64)
		}
	}
	return s
}

// WriteCSV writes one line per group, full precision, savings empty where
// unknown. There is no total line: a spreadsheet adds the rows.
func (sum CostSummary) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{string(sum.By), "gpu_hours_on_prem", "gpu_hours_spot", "gpu_hours_on_demand",
		"dollars_on_prem", "dollars_spot", "dollars_on_demand", "dollars_total", "spot_saved_dollars", "runs_in_flight"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, r := range sum.Rows {
		saved := ""
		if r.SpotSavedDollars != nil {
			saved = f(*r.SpotSavedDollars)
		}
		_ = cw.Write([]string{r.Group, f(r.GPUHours.OnPrem), f(r.GPUHours.Spot), f(r.GPUHours.OnDemand),
			f(r.Dollars.OnPrem), f(r.Dollars.Spot), f(r.Dollars.OnDemand), f(r.TotalDollars), saved, strconv.Itoa(r.InFlight)})
	}
	cw.Flush()
	return cw.Error()
}
