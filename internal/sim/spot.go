package sim

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// Spot replay defaults: DefaultOnDemandPrice prices on-demand on traces of
// an instance type neither their metadata nor spotpolicy.OnDemandPrices
// knows (it is a p3.2xlarge's, the shared traces' instance); spot on
// traces without prices is DefaultSpotFraction of on-demand (what the
// shared traces that carry prices charge a p3.2xlarge: $0.918 of $3.06).
// A job moving to another zone waits DefaultZoneMove over its changeover
// for its checkpoint to follow.
const (
	DefaultSpotJobs      = 300 // per trace
	DefaultOnDemandPrice = 3.06
	DefaultSpotFraction  = 0.3
	DefaultZoneMove      = 12 * time.Minute
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
// on Jobs deadline jobs per trace, each starting at a seeded random tick;
// and, where ZonePolicies are given, every multi-zone policy on Jobs jobs
// per zone set (the traces of one directory, when it holds two or more).
type SpotConfig struct {
	// Source is where the traces were read from, for the report.
	Source   string
	Traces   []*spotpolicy.Trace
	Job      spotpolicy.Job
	Policies []spotpolicy.Policy
	// ZonePolicies run over each zone set; ZoneMove is the delay a move
	// to another zone adds to the changeover.
	ZonePolicies []spotpolicy.ZonePolicy
	ZoneMove     time.Duration
	Jobs         int // per trace
	Seed         uint64
	// OnDemandPrice is per instance-hour, for traces whose instance type
	// has no known price (Trace.OnDemandFor); SpotFraction prices spot at
	// that share of the on-demand price where a trace has no prices.
	OnDemandPrice, SpotFraction float64
	// Job.Instances 0 sizes each trace's job to its pool
	// (Trace.PoolSize): a trace of a 4-instance pool replays 4-instance
	// jobs.
	// Log gets a warning for every trace or zone set skipped because it
	// is shorter than the deadline (nil: slog.Default()).
	Log *slog.Logger
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
	ZoneMove      time.Duration
	Policies      []string
	Traces        []SpotTraceResult
	Mean          []SpotStats // per policy, over every job of every trace
	// Skipped names the traces too short for the deadline;
	// SkippedZoneSets the zone sets left out, and why.
	Skipped, SkippedZoneSets []string
	ZonePolicies             []string
	ZoneSets                 []ZoneSetResult
}

// SpotTraceResult is one trace's replay.
type SpotTraceResult struct {
	Name         string
	Gap          time.Duration
	Ticks        int
	Availability float64 // share of ticks with spot enough for the job
	Prices       bool    // the trace has its own spot prices
	InstanceType string  // "" when unknown
	Instances    int     // the job's: spot counts only when this many are available
	// OnDemandPrice is per instance-hour, from the trace's metadata, the
	// price table, or SpotConfig.OnDemandPrice (PriceKnown false).
	OnDemandPrice float64
	PriceKnown    bool
	Stats         []SpotStats
	Runs          [][]spotpolicy.Run // per policy, per job
}

// ZoneSetResult is one zone set's replay: the same jobs (start ticks) in
// every zone alone under each single-zone policy, pooled over the zones
// (Single, per SpotResult.Policies), and across the zones under each
// multi-zone policy (Multi, per SpotResult.ZonePolicies).
type ZoneSetResult struct {
	Name  string
	Zones []string
	Ticks int
	// AnyAvailability is the share of ticks some zone has spot enough.
	AnyAvailability float64
	Instances       int
	OnDemandPrice   float64
	Single, Multi   []SpotStats
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
	Moves          int
}

// add counts one job's run.
func (s *SpotStats) add(r spotpolicy.Run, onDemandCost float64) {
	one := SpotStats{Jobs: 1, Cost: r.Cost, OnDemandCost: onDemandCost, Finish: r.FinishedAt, Spot: r.SpotTime,
		OnDemand: r.OnDemandTime, Changeovers: r.Changeovers, Preemptions: r.Preemptions, Moves: r.Moves}
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
	s.Moves += o.Moves
}

// CostVsOnDemand is the policy's cost over the on-demand baseline's.
func (s *SpotStats) CostVsOnDemand() float64 { return s.Cost / s.OnDemandCost }

// MetRatio is the share of deadlines met.
func (s *SpotStats) MetRatio() float64 { return float64(s.Met) / float64(s.Jobs) }

func (s *SpotStats) meanHours(d time.Duration) float64 { return d.Hours() / float64(s.Jobs) }

func (s *SpotStats) perJob(n int) float64 { return float64(n) / float64(s.Jobs) }

// RunSpot replays cfg. A trace (or zone set) shorter than the job's
// deadline is skipped with a warning naming it; if every trace is, RunSpot
// fails with the first one's *spotpolicy.ShortTraceError.
func RunSpot(cfg SpotConfig) (*SpotResult, error) {
	switch {
	case len(cfg.Traces) == 0:
		return nil, errors.New("spot replay: no traces")
	case cfg.Jobs < 1:
		return nil, fmt.Errorf("spot replay: %d jobs per trace: want 1 or more", cfg.Jobs)
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	res := &SpotResult{Source: cfg.Source, Job: cfg.Job, Jobs: cfg.Jobs, Seed: cfg.Seed, OnDemandPrice: cfg.OnDemandPrice,
		SpotFraction: cfg.SpotFraction, ZoneMove: cfg.ZoneMove}
	for _, p := range cfg.Policies {
		res.Policies = append(res.Policies, p.Name())
		res.Mean = append(res.Mean, SpotStats{Policy: p.Name()})
	}
	for _, p := range cfg.ZonePolicies {
		res.ZonePolicies = append(res.ZonePolicies, p.Name())
	}
	var firstShort error
	for _, tr := range cfg.Traces {
		sim := cfg.sim(tr)
		if err := sim.Validate(); err != nil {
			return nil, err
		}
		starts, err := sim.Starts(cfg.Jobs, cfg.Seed)
		var short *spotpolicy.ShortTraceError
		if errors.As(err, &short) {
			log.Warn("spot replay: trace skipped, shorter than the deadline", "trace", tr.Name, "covers", short.Covers, "deadline", short.Deadline)
			res.Skipped = append(res.Skipped, tr.Name)
			firstShort = cmp.Or(firstShort, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		baseline := make([]float64, len(starts))
		for i, s := range starts {
			baseline[i] = sim.Simulate(spotpolicy.OnDemandOnly{}, s).Cost
		}
		_, known := tr.OnDemandFor()
		if !known {
			log.Warn("spot replay: no on-demand list price for the trace's instance type; priced at the configured fallback",
				"trace", tr.Name, "device", tr.Device, "instance_type", tr.InstanceType, "on_demand_price", cfg.OnDemandPrice)
		}
		tres := SpotTraceResult{Name: tr.Name, Gap: tr.Gap, Ticks: len(tr.Available), Availability: availability(tr, sim.Job.Size()),
			Prices: tr.Prices != nil, InstanceType: tr.InstanceType, Instances: sim.Job.Size(), OnDemandPrice: sim.OnDemandPrice, PriceKnown: known}
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
	if len(res.Traces) == 0 {
		return nil, firstShort
	}
	if len(cfg.ZonePolicies) > 0 {
		if err := cfg.runZoneSets(res, log); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// sim is the single-zone replay of tr: its job sized to the pool unless
// the config sizes it, priced at the trace's instance type's on-demand
// price where that is known.
func (cfg *SpotConfig) sim(tr *spotpolicy.Trace) *spotpolicy.Sim {
	job := cfg.Job
	if job.Instances == 0 {
		job.Instances = tr.PoolSize()
	}
	od, ok := tr.OnDemandFor()
	if !ok {
		od = cfg.OnDemandPrice
	}
	return &spotpolicy.Sim{Trace: tr, Job: job, OnDemandPrice: od, SpotFraction: cfg.SpotFraction}
}

// availability is the share of tr's ticks with at least k instances.
func availability(tr *spotpolicy.Trace, k int) float64 {
	up := 0
	for _, n := range tr.Available {
		if n >= k {
			up++
		}
	}
	return float64(up) / float64(len(tr.Available))
}

// zoneSet is the traces of one directory recorded for one device (and so
// one instance type) and pool size: zones of one market.
type zoneSet struct {
	name   string
	traces []*spotpolicy.Trace
}

// zoneSets groups the traces by directory, device and pool size, in
// order; a group of two or more traces is a set. A set is named by its
// directory, and by its device too where the directory holds several.
func (cfg *SpotConfig) zoneSets(traces []*spotpolicy.Trace) []zoneSet {
	type key struct {
		dir, device string
		pool        int
	}
	var order []key
	groups := map[key][]*spotpolicy.Trace{}
	devices := map[string]map[key]bool{}
	for _, tr := range traces {
		k := key{path.Dir(tr.Name), tr.Device, cfg.sim(tr).Job.Size()}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], tr)
		if devices[k.dir] == nil {
			devices[k.dir] = map[key]bool{}
		}
		devices[k.dir][k] = true
	}
	var sets []zoneSet
	for _, k := range order {
		if len(groups[k]) < 2 {
			continue
		}
		name := k.dir
		if len(devices[k.dir]) > 1 {
			name = fmt.Sprintf("%s (%s, %d)", k.dir, cmp.Or(k.device, "?"), k.pool)
		}
		sets = append(sets, zoneSet{name, groups[k]})
	}
	return sets
}

// runZoneSets replays every zone set of cfg's traces: the same start ticks
// for every zone alone and for the multi-zone policies across them.
func (cfg *SpotConfig) runZoneSets(res *SpotResult, log *slog.Logger) error {
	// A zone too short for the deadline was skipped above; its set runs
	// with the others.
	var traces []*spotpolicy.Trace
	for _, tr := range cfg.Traces {
		if !slices.Contains(res.Skipped, tr.Name) {
			traces = append(traces, tr)
		}
	}
	for _, zset := range cfg.zoneSets(traces) {
		name, set := zset.name, zset.traces
		sims := make([]*spotpolicy.Sim, len(set))
		var zones []string
		for i, tr := range set {
			sims[i] = cfg.sim(tr)
			zones = append(zones, path.Base(tr.Name))
		}
		zs := &spotpolicy.ZoneSim{Zones: set, Job: sims[0].Job, Move: cfg.ZoneMove, OnDemandPrice: sims[0].OnDemandPrice,
			SpotFraction: cfg.SpotFraction}
		var bad error
		for i, s := range sims[1:] {
			if s.OnDemandPrice != zs.OnDemandPrice {
				bad = fmt.Errorf("%s and %s have on-demand prices $%g and $%g", set[0].Name, set[i+1].Name, zs.OnDemandPrice, s.OnDemandPrice)
			}
		}
		if bad == nil {
			bad = zs.Validate()
		}
		if bad != nil {
			// The zones ran alone above; only the set is left out.
			log.Warn("spot replay: zone set skipped, its zones are not one market", "zones", name, "error", bad)
			res.SkippedZoneSets = append(res.SkippedZoneSets, name+": "+bad.Error())
			continue
		}
		starts, err := zs.Starts(name, cfg.Jobs, cfg.Seed)
		var short *spotpolicy.ShortTraceError
		if errors.As(err, &short) {
			log.Warn("spot replay: zone set skipped, shorter than the deadline", "zones", name, "covers", short.Covers, "deadline", short.Deadline)
			res.SkippedZoneSets = append(res.SkippedZoneSets, name+": shorter than the deadline")
			continue
		}
		if err != nil {
			return err
		}
		zr := ZoneSetResult{Name: name, Zones: zones, Ticks: zs.Ticks(), Instances: zs.Job.Size(), OnDemandPrice: zs.OnDemandPrice}
		any := 0
		for t := range zr.Ticks {
			for _, tr := range set {
				if tr.Available[t] >= zr.Instances {
					any++
					break
				}
			}
		}
		zr.AnyAvailability = float64(any) / float64(zr.Ticks)
		baseline := make([]float64, len(starts))
		for i, s := range starts {
			baseline[i] = zs.Simulate(spotpolicy.OneZone{Policy: spotpolicy.OnDemandOnly{}}, s).Cost
		}
		for _, p := range cfg.Policies {
			st := SpotStats{Policy: p.Name()}
			for _, sim := range sims {
				for i, s := range starts {
					st.add(sim.Simulate(p, s), baseline[i])
				}
			}
			zr.Single = append(zr.Single, st)
		}
		for _, p := range cfg.ZonePolicies {
			st := SpotStats{Policy: p.Name()}
			for i, s := range starts {
				st.add(zs.Simulate(p, s), baseline[i])
			}
			zr.Multi = append(zr.Multi, st)
		}
		res.ZoneSets = append(res.ZoneSets, zr)
	}
	return nil
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
