package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// Spot replay defaults: a p3.2xlarge (one V100), the shared traces'
// instance, is $3.06/h on-demand in us-east-1; its spot price in the
// traces that carry one is 0.3 × that.
const (
	DefaultSpotJobs      = 300 // per trace
	DefaultOnDemandPrice = 3.06
	DefaultSpotFraction  = 0.3
)

// DefaultSpotJob is the spot replay's job by default: two days of work
// due in three, with a 12-minute changeover.
var DefaultSpotJob = spotpolicy.Job{Work: 48 * time.Hour, Deadline: 72 * time.Hour, Overhead: 12 * time.Minute}

// LoadSpotTraces reads root, a trace file or a directory searched
// recursively for .json traces, in path order. A trace in a directory is
// named by its path under it without the extension (zones repeat across
// subdirectories); a single file by its base name.
func LoadSpotTraces(root string) ([]*spotpolicy.Trace, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	files := []string{root}
	if st.IsDir() {
		files = nil
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".json") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no .json spot traces in it", root)
		}
	}
	traces := make([]*spotpolicy.Trace, 0, len(files))
	for _, file := range files {
		name := filepath.Base(file)
		if st.IsDir() {
			name, _ = filepath.Rel(root, file)
		}
		tr, err := spotpolicy.LoadTrace(file)
		if err != nil {
			if st.IsDir() {
				// Zones repeat across subdirectories: say which file.
				err = fmt.Errorf("%s: %w", name, err)
			}
			return nil, err
		}
		tr.Name = strings.TrimSuffix(filepath.ToSlash(name), filepath.Ext(name))
		traces = append(traces, tr)
	}
	return traces, nil
}

// SpotConfig is a spot replay: every policy, and the on-demand baseline,
// on Jobs deadline jobs per trace, each starting at a seeded random tick.
type SpotConfig struct {
	// Source is where the traces were read from, for the report.
	Source   string
	Traces   []*spotpolicy.Trace
	Job      spotpolicy.Job
	Policies []spotpolicy.Policy
	Jobs     int // per trace
	Seed     uint64
	// OnDemandPrice is per instance-hour; SpotFraction prices spot at
	// that share of it where a trace has no prices.
	OnDemandPrice, SpotFraction float64
}

// SpotResult is a whole spot replay: per trace and policy, and pooled
// over every job.
type SpotResult struct {
	Source        string
	Job           spotpolicy.Job
	Jobs          int // per trace
	Seed          uint64
	OnDemandPrice float64
	SpotFraction  float64
	Policies      []string
	Traces        []SpotTraceResult
	Mean          []SpotStats // per policy, over every job of every trace
}

// SpotTraceResult is one trace's replay.
type SpotTraceResult struct {
	Name         string
	Gap          time.Duration
	Ticks        int
	Availability float64 // share of ticks with spot
	Prices       bool    // the trace has its own spot prices
	Stats        []SpotStats
	Runs         [][]spotpolicy.Run // per policy, per job
}

// SpotStats sums one policy's runs.
type SpotStats struct {
	Policy         string
	Jobs           int
	Met            int
	Cost           float64 // dollars, all jobs
	OnDemandCost   float64 // of the on-demand baseline on the same jobs
	Finish         time.Duration
	Spot, OnDemand time.Duration
	Changeovers    int
	Preemptions    int
}

// add counts one job's run.
func (s *SpotStats) add(r spotpolicy.Run, onDemandCost float64) {
	one := SpotStats{Jobs: 1, Cost: r.Cost, OnDemandCost: onDemandCost, Finish: r.FinishedAt, Spot: r.SpotTime,
		OnDemand: r.OnDemandTime, Changeovers: r.Changeovers, Preemptions: r.Preemptions}
	if r.MetDeadline {
		one.Met = 1
	}
	s.merge(one)
}

func (s *SpotStats) merge(o SpotStats) {
	s.Jobs += o.Jobs
	s.Met += o.Met
	s.Cost += o.Cost
	s.OnDemandCost += o.OnDemandCost
	s.Finish += o.Finish
	s.Spot += o.Spot
	s.OnDemand += o.OnDemand
	s.Changeovers += o.Changeovers
	s.Preemptions += o.Preemptions
}

// CostVsOnDemand is the policy's cost over the on-demand baseline's.
func (s *SpotStats) CostVsOnDemand() float64 { return s.Cost / s.OnDemandCost }

// MetRatio is the share of deadlines met.
func (s *SpotStats) MetRatio() float64 { return float64(s.Met) / float64(s.Jobs) }

func (s *SpotStats) meanHours(d time.Duration) float64 { return d.Hours() / float64(s.Jobs) }

func (s *SpotStats) perJob(n int) float64 { return float64(n) / float64(s.Jobs) }

// RunSpot replays cfg. A trace shorter than the job's deadline is a
// *spotpolicy.ShortTraceError.
func RunSpot(cfg SpotConfig) (*SpotResult, error) {
	switch {
	case len(cfg.Traces) == 0:
		return nil, errors.New("spot replay: no traces")
	case cfg.Jobs < 1:
		return nil, fmt.Errorf("spot replay: %d jobs per trace: want 1 or more", cfg.Jobs)
	}
	res := &SpotResult{Source: cfg.Source, Job: cfg.Job, Jobs: cfg.Jobs, Seed: cfg.Seed, OnDemandPrice: cfg.OnDemandPrice,
		SpotFraction: cfg.SpotFraction}
	for _, p := range cfg.Policies {
		res.Policies = append(res.Policies, p.Name())
		res.Mean = append(res.Mean, SpotStats{Policy: p.Name()})
	}
	for _, tr := range cfg.Traces {
		sim := &spotpolicy.Sim{Trace: tr, Job: cfg.Job, OnDemandPrice: cfg.OnDemandPrice, SpotFraction: cfg.SpotFraction}
		if err := sim.Validate(); err != nil {
			return nil, err
		}
		starts, err := sim.Starts(cfg.Jobs, cfg.Seed)
		if err != nil {
			return nil, err
		}
		baseline := make([]float64, len(starts))
		for i, s := range starts {
			baseline[i] = sim.Simulate(spotpolicy.OnDemandOnly{}, s).Cost
		}
		tres := SpotTraceResult{Name: tr.Name, Gap: tr.Gap, Ticks: len(tr.Available), Availability: tr.Availability(), Prices: tr.Prices != nil}
		for pi, p := range cfg.Policies {
			st := SpotStats{Policy: p.Name()}
			runs := make([]spotpolicy.Run, len(starts))
			for i, s := range starts {
				runs[i] = sim.Simulate(p, s)
				st.add(runs[i], baseline[i])
			}
			tres.Stats = append(tres.Stats, st)
			tres.Runs = append(tres.Runs, runs)
			res.Mean[pi].merge(st)
		}
		res.Traces = append(res.Traces, tres)
	}
	return res, nil
}

// stats returns the pooled stats of the named policy, if it ran.
func (r *SpotResult) stats(policy string) (*SpotStats, bool) {
	i := slices.Index(r.Policies, policy)
	if i < 0 {
		return nil, false
	}
	return &r.Mean[i], true
}

// headline compares Gangway's policy with uniform progress, when both ran.
func (r *SpotResult) headline() string {
	g, ok1 := r.stats(spotpolicy.NameGangway)
	u, ok2 := r.stats(spotpolicy.NameUniformProgress)
	if !ok1 || !ok2 {
		return ""
	}
	saving := 1 - g.Cost/u.Cost
	than := "less"
	if saving < 0 {
		saving, than = -saving, "more"
	}
	return fmt.Sprintf("gangway costs %.1f%% %s than uniform-progress (%.3f vs %.3f of on-demand) and meets %d of %d deadlines (uniform-progress %d)",
		100*saving, than, g.CostVsOnDemand(), u.CostVsOnDemand(), g.Met, g.Jobs, u.Met)
}
