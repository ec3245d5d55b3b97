package sim

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// WriteText writes one row per trace with a column per policy (cost
// relative to on-demand, deadlines met), the mean row over all jobs, then
// the pooled details per policy.
func (r *SpotResult) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Spot replay: %d traces in %s, %d jobs each (seed %d)\n", len(r.Traces), r.Source, r.Jobs, r.Seed)
	size := "each trace's pool"
	if r.Job.Instances > 0 {
		size = strconv.Itoa(r.Job.Instances)
	}
	fmt.Fprintf(w, "job: %s of work on %s instances at once, deadline %s, changeover %s\n",
		fmtDur(r.Job.Work), size, fmtDur(r.Job.Deadline), fmtDur(r.Job.Overhead))
	fmt.Fprintf(w, "on-demand at the instance type's list price ($%.3f/h where it is not known), spot at the trace's price or %.2f x on-demand\n",
		r.OnDemandPrice, r.SpotFraction)
	fmt.Fprintln(w, "per policy: cost relative to on-demand on the same jobs, and the share of deadlines met")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "trace\tinstance\tn\tspot\t"+strings.Join(r.Policies, "\t"))
	row := func(name, typ, n, avail string, stats []SpotStats) {
		line := name + "\t" + typ + "\t" + n + "\t" + avail
		for i := range stats {
			line += fmt.Sprintf("\t%.3f %4s", stats[i].CostVsOnDemand(), fmtPct(stats[i].MetRatio()))
		}
		fmt.Fprintln(tw, line)
	}
	for _, t := range r.Traces {
		typ := cmp.Or(t.InstanceType, "?")
		if !t.PriceKnown {
			typ += "*"
		}
		row(t.Name, fmt.Sprintf("%s $%.2f", typ, t.OnDemandPrice), strconv.Itoa(t.Instances), fmtPct(t.Availability), t.Stats)
	}
	row("mean", "", "", "", r.Mean)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcost\tdeadlines met\tfinish (mean)\tspot h\ton-demand h\tchangeovers\tpreemptions\t")
	for i := range r.Mean {
		s := &r.Mean[i]
		fmt.Fprintf(tw, "%s\t%.3f\t%d/%d\t%.1fh\t%.1f\t%.1f\t%.1f\t%.1f\t\n", s.Policy, s.CostVsOnDemand(), s.Met, s.Jobs,
			s.meanHours(s.Finish), s.meanHours(s.Spot), s.meanHours(s.OnDemand), s.perJob(s.Changeovers), s.perJob(s.Preemptions))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if h := r.headline(); h != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, h)
	}
	if err := r.writeZonesText(w); err != nil {
		return err
	}
	if len(r.Skipped)+len(r.SkippedZoneSets) > 0 {
		fmt.Fprintln(w)
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "skipped, shorter than the deadline: %s\n", strings.Join(r.Skipped, ", "))
	}
	if len(r.SkippedZoneSets) > 0 {
		fmt.Fprintf(w, "zone sets skipped: %s\n", strings.Join(r.SkippedZoneSets, "; "))
	}
	return nil
}

// writeZonesText writes the zone sets' table: each single-zone policy
// pooled over the set's zones alone, then each multi-zone policy, and the
// multi-zone policies' cost over single-zone uniform progress's.
func (r *SpotResult) writeZonesText(w io.Writer) error {
	if len(r.ZoneSets) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Zone sets (the traces of one directory): the same jobs in each zone alone (/1z: pooled over the zones) and moving\n")
	fmt.Fprintf(w, "between the zones, a move adding %s to the changeover; cost relative to on-demand, deadlines met; ÷up/1z: the\n", fmtDur(r.ZoneMove))
	fmt.Fprintln(w, "multi-zone policy's cost over uniform-progress's in one zone")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "zone set\tzones\tspot (any)"
	for _, p := range r.Policies {
		head += "\t" + p + "/1z"
	}
	for _, p := range r.ZonePolicies {
		head += "\t" + p
	}
	up := slices.Index(r.Policies, spotpolicy.NameUniformProgress)
	if up >= 0 {
		for _, p := range r.ZonePolicies {
			head += "\t" + p + " ÷up/1z"
		}
	}
	fmt.Fprintln(tw, head)
	for _, z := range r.ZoneSets {
		line := fmt.Sprintf("%s\t%d\t%s", z.Name, len(z.Zones), fmtPct(z.AnyAvailability))
		for _, st := range append(slices.Clone(z.Single), z.Multi...) {
			line += fmt.Sprintf("\t%.3f %4s", st.CostVsOnDemand(), fmtPct(st.MetRatio()))
		}
		if up >= 0 {
			for i := range z.Multi {
				line += fmt.Sprintf("\t%.3f", z.Multi[i].CostVsOnDemand()/z.Single[up].CostVsOnDemand())
			}
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "zone set\tpolicy\tcost\tdeadlines met\tfinish (mean)\tspot h\ton-demand h\tchangeovers\tmoves\tpreemptions\t")
	for _, z := range r.ZoneSets {
		for _, s := range append(slices.Clone(z.Single), z.Multi...) {
			name := s.Policy
			if slices.Contains(r.Policies, name) {
				name += "/1z"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%d/%d\t%.1fh\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", z.Name, name, s.CostVsOnDemand(), s.Met, s.Jobs,
				s.meanHours(s.Finish), s.meanHours(s.Spot), s.meanHours(s.OnDemand), s.perJob(s.Changeovers), s.perJob(s.Moves), s.perJob(s.Preemptions))
		}
	}
	return tw.Flush()
}

func fmtPct(x float64) string { return strconv.FormatFloat(100*x, 'f', 0, 64) + "%" }

// fmtDur prints a duration short: "72h", "12m", "1h30m", else as
// time.Duration does.
func fmtDur(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute != 0:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
}

// SpotJSON is one policy's line of `gangway replay spot --output json`.
type SpotJSON struct {
	Policy            string          `json:"policy"`
	CostVsOnDemand    float64         `json:"cost_vs_on_demand"`
	DeadlinesMetRatio float64         `json:"deadlines_met_ratio"`
	DeadlinesMet      int             `json:"deadlines_met"`
	Jobs              int             `json:"jobs"`
	MeanCost          float64         `json:"mean_cost_dollars"`
	MeanFinishHours   float64         `json:"mean_finish_hours"`
	SpotHours         float64         `json:"mean_spot_hours"`
	OnDemandHours     float64         `json:"mean_on_demand_hours"`
	Changeovers       float64         `json:"mean_changeovers"`
	Preemptions       float64         `json:"mean_preemptions"`
	DurationHours     float64         `json:"duration_hours"`
	DeadlineHours     float64         `json:"deadline_hours"`
	OverheadHours     float64         `json:"overhead_hours"`
	Seed              uint64          `json:"seed"`
	Traces            []SpotTraceJSON `json:"traces"`
}

// SpotTraceJSON is one trace's numbers in a SpotJSON line.
type SpotTraceJSON struct {
	Trace             string  `json:"trace"`
	SpotAvailability  float64 `json:"spot_availability"`
	CostVsOnDemand    float64 `json:"cost_vs_on_demand"`
	DeadlinesMetRatio float64 `json:"deadlines_met_ratio"`
	MeanCost          float64 `json:"mean_cost_dollars"`
	MeanFinishHours   float64 `json:"mean_finish_hours"`
	Changeovers       float64 `json:"mean_changeovers"`
	Preemptions       float64 `json:"mean_preemptions"`
}

// WriteJSON writes one object per policy per line: the pooled numbers,
// the replay's settings, and the per-trace numbers under "traces"; then
// one SpotZoneJSON per zone set and policy.
func (r *SpotResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for i := range r.Mean {
		s := &r.Mean[i]
		o := SpotJSON{Policy: s.Policy, CostVsOnDemand: round6(s.CostVsOnDemand()), DeadlinesMetRatio: round6(s.MetRatio()),
			DeadlinesMet: s.Met, Jobs: s.Jobs, MeanCost: round6(s.Cost / float64(s.Jobs)), MeanFinishHours: round6(s.meanHours(s.Finish)),
			SpotHours: round6(s.meanHours(s.Spot)), OnDemandHours: round6(s.meanHours(s.OnDemand)),
			Changeovers: round6(s.perJob(s.Changeovers)), Preemptions: round6(s.perJob(s.Preemptions)),
			DurationHours: r.Job.Work.Hours(), DeadlineHours: r.Job.Deadline.Hours(), OverheadHours: r.Job.Overhead.Hours(), Seed: r.Seed}
		for _, t := range r.Traces {
			ts := &t.Stats[i]
			o.Traces = append(o.Traces, SpotTraceJSON{Trace: t.Name, SpotAvailability: round6(t.Availability),
				CostVsOnDemand: round6(ts.CostVsOnDemand()), DeadlinesMetRatio: round6(ts.MetRatio()),
				MeanCost: round6(ts.Cost / float64(ts.Jobs)), MeanFinishHours: round6(ts.meanHours(ts.Finish)),
				Changeovers: round6(ts.perJob(ts.Changeovers)), Preemptions: round6(ts.perJob(ts.Preemptions))})
		}
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	up := slices.Index(r.Policies, spotpolicy.NameUniformProgress)
	for _, z := range r.ZoneSets {
		for _, s := range append(slices.Clone(z.Single), z.Multi...) {
			o := SpotZoneJSON{ZoneSet: z.Name, Zones: z.Zones, Policy: s.Policy, OneZone: slices.Contains(r.Policies, s.Policy),
				SpotAvailabilityAny: round6(z.AnyAvailability), CostVsOnDemand: round6(s.CostVsOnDemand()),
				DeadlinesMetRatio: round6(s.MetRatio()), DeadlinesMet: s.Met, Jobs: s.Jobs, MeanCost: round6(s.Cost / float64(s.Jobs)),
				Changeovers: round6(s.perJob(s.Changeovers)), Moves: round6(s.perJob(s.Moves)), Preemptions: round6(s.perJob(s.Preemptions)),
				ZoneMoveHours: r.ZoneMove.Hours()}
			if up >= 0 {
				o.CostVsUniformProgress = round6(s.CostVsOnDemand() / z.Single[up].CostVsOnDemand())
			}
			if err := enc.Encode(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// SpotZoneJSON is one policy's line for one zone set in `gangway replay
// spot --output json`, after the per-policy lines: OneZone policies ran
// in each zone alone (pooled over the zones), the others across them.
type SpotZoneJSON struct {
	ZoneSet             string   `json:"zone_set"`
	Zones               []string `json:"zones"`
	Policy              string   `json:"policy"`
	OneZone             bool     `json:"one_zone"`
	SpotAvailabilityAny float64  `json:"spot_availability_any_zone"`
	CostVsOnDemand      float64  `json:"cost_vs_on_demand"`
	// CostVsUniformProgress is over uniform-progress in one zone.
	CostVsUniformProgress float64 `json:"cost_vs_uniform_progress_one_zone,omitempty"`
	DeadlinesMetRatio     float64 `json:"deadlines_met_ratio"`
	DeadlinesMet          int     `json:"deadlines_met"`
	Jobs                  int     `json:"jobs"`
	MeanCost              float64 `json:"mean_cost_dollars"`
	Changeovers           float64 `json:"mean_changeovers"`
	Moves                 float64 `json:"mean_moves"`
	Preemptions           float64 `json:"mean_preemptions"`
	ZoneMoveHours         float64 `json:"zone_move_hours"`
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// csv6 writes a number for the spot CSV files: six decimals.
func csv6(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }

var spotCSVHeader = []string{"trace", "spot_availability", "policy", "jobs", "cost_vs_on_demand", "deadlines_met", "deadlines_met_ratio",
	"mean_cost_dollars", "mean_finish_hours", "mean_spot_hours", "mean_on_demand_hours", "mean_changeovers", "mean_preemptions"}

// WriteSummaryCSV writes the per-trace table as CSV: one row per trace
// and policy, then the mean rows (trace "mean"). It is spot.csv of
// WriteCSV, and what `--output csv` prints.
func (r *SpotResult) WriteSummaryCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	r.writeSummaryCSV(cw)
	cw.Flush()
	return cw.Error()
}

func (r *SpotResult) writeSummaryCSV(cw *csv.Writer) {
	_ = cw.Write(spotCSVHeader)
	row := func(trace, avail string, s *SpotStats) {
		_ = cw.Write([]string{trace, avail, s.Policy, strconv.Itoa(s.Jobs), csv6(s.CostVsOnDemand()), strconv.Itoa(s.Met), csv6(s.MetRatio()),
			csv6(s.Cost / float64(s.Jobs)), csv6(s.meanHours(s.Finish)), csv6(s.meanHours(s.Spot)), csv6(s.meanHours(s.OnDemand)),
			csv6(s.perJob(s.Changeovers)), csv6(s.perJob(s.Preemptions))})
	}
	for _, t := range r.Traces {
		for i := range t.Stats {
			row(t.Name, csv6(t.Availability), &t.Stats[i])
		}
	}
	for i := range r.Mean {
		row("mean", "", &r.Mean[i])
	}
}

// writeRunsCSV writes every job's run under every policy.
func (r *SpotResult) writeRunsCSV(cw *csv.Writer) {
	_ = cw.Write([]string{"trace", "start_hours", "policy", "cost_dollars", "met_deadline", "finished", "finish_hours",
		"spot_hours", "on_demand_hours", "changeovers", "preemptions"})
	for _, t := range r.Traces {
		for pi, runs := range t.Runs {
			for _, run := range runs {
				_ = cw.Write([]string{t.Name, csv6(run.Start.Hours()), r.Policies[pi], csv6(run.Cost), strconv.FormatBool(run.MetDeadline),
					strconv.FormatBool(run.Finished), csv6(run.FinishedAt.Hours()), csv6(run.SpotTime.Hours()), csv6(run.OnDemandTime.Hours()),
					strconv.Itoa(run.Changeovers), strconv.Itoa(run.Preemptions)})
			}
		}
	}
}

// writeZonesCSV writes the zone sets' table: one row per set and policy.
func (r *SpotResult) writeZonesCSV(cw *csv.Writer) {
	_ = cw.Write([]string{"zone_set", "zones", "policy", "one_zone", "jobs", "cost_vs_on_demand", "deadlines_met", "deadlines_met_ratio",
		"mean_cost_dollars", "mean_finish_hours", "mean_spot_hours", "mean_on_demand_hours", "mean_changeovers", "mean_moves", "mean_preemptions"})
	for _, z := range r.ZoneSets {
		for _, s := range append(slices.Clone(z.Single), z.Multi...) {
			_ = cw.Write([]string{z.Name, strconv.Itoa(len(z.Zones)), s.Policy, strconv.FormatBool(slices.Contains(r.Policies, s.Policy)),
				strconv.Itoa(s.Jobs), csv6(s.CostVsOnDemand()), strconv.Itoa(s.Met), csv6(s.MetRatio()), csv6(s.Cost / float64(s.Jobs)),
				csv6(s.meanHours(s.Finish)), csv6(s.meanHours(s.Spot)), csv6(s.meanHours(s.OnDemand)), csv6(s.perJob(s.Changeovers)),
				csv6(s.perJob(s.Moves)), csv6(s.perJob(s.Preemptions))})
		}
	}
}

// WriteCSV writes spot.csv (the per-trace table, WriteSummaryCSV),
// spot-runs.csv (every job under every policy) and, when there are zone
// sets, spot-zones.csv (their table) to dir.
func (r *SpotResult) WriteCSV(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, f := range []struct {
		name string
		fill func(*csv.Writer)
	}{{"spot.csv", r.writeSummaryCSV}, {"spot-runs.csv", r.writeRunsCSV}, {"spot-zones.csv", r.writeZonesCSV}} {
		if f.name == "spot-zones.csv" && len(r.ZoneSets) == 0 {
			continue
		}
		name := filepath.Join(dir, f.name)
		if err := WriteCSVFile(name, f.fill); err != nil {
			return files, err
		}
		files = append(files, name)
	}
	return files, nil
}
