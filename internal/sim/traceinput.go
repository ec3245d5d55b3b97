package sim

import (
	"context"
	"fmt"

	"github.com/gangwayhq/gangway/placement"
)

// TraceInput names the jobs a dynamic replay (RunTrace) replays: a
// gang-job CSV, or an openb pod list whose tasks without times draw them
// from another pod list.
type TraceInput struct {
	// Jobs is a gang-job CSV (LoadGangJobs); "" replays Tasks.
	Jobs string
	// Tasks is an openb pod list (LoadOpenBTasks).
	Tasks string
	// TimesFrom is the openb pod list whose arrival gaps and durations
	// are drawn for tasks without times; read only when some task lacks
	// them.
	TimesFrom string
	// Limit keeps the first Limit jobs (in submit order) or tasks (in
	// file order); 0 keeps all.
	Limit int
	// Seed seeds the drawn times and the mix.
	Seed uint64
	// Mix, when set, replays a variant of the pod list (GenerateMix, for
	// the fleet Nodes, seeded by Seed) instead of the list itself; a copy
	// arrives when the task it replaces did.
	Mix   *Mix
	Nodes []placement.Node
	// GangHeavy, when above 0, replays that many jobs of the synthetic
	// gang-heavy mix (GangHeavyJobs for Nodes, seeded by Seed) instead of
	// a file.
	GangHeavy int
}

// TraceJobs are a loaded TraceInput.
type TraceJobs struct {
	Jobs []TraceJob
	// File is the file the jobs came from.
	File string
	// Timing says where tasks without times drew theirs (nil for a
	// gang-job CSV).
	Timing *TimingSource
	// Workload is the typical workload fragmentation is measured against,
	// as in the FGD protocol (nil for a gang-job CSV: the engine's own).
	Workload []placement.WorkloadClass
	// Mix is the variant replayed (Mix.String), "" for the list itself.
	Mix string
}

// InputError is a TraceInput file that could not be used; Field names it
// ("jobs", "tasks" or "times-from").
type InputError struct {
	Field string
	Err   error
}

func (e *InputError) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }

func (e *InputError) Unwrap() error { return e.Err }

// LoadTraceJobs reads the input's jobs.
func LoadTraceJobs(in TraceInput) (TraceJobs, error) {
	if in.Limit < 0 {
		return TraceJobs{}, &InputError{"limit", fmt.Errorf("want 0 (all) or more, got %d", in.Limit)}
	}
	if in.GangHeavy > 0 {
		if in.Jobs != "" || in.Mix != nil {
			return TraceJobs{}, &InputError{"gang-heavy", fmt.Errorf("the synthetic gang-heavy mix replaces --jobs and --mix")}
		}
		jobs, err := GangHeavyJobs(in.GangHeavy, in.Nodes, in.Seed)
		if err != nil {
			return TraceJobs{}, &InputError{"gang-heavy", err}
		}
		return TraceJobs{Jobs: jobs, File: fmt.Sprintf("gang-heavy mix (%d jobs)", in.GangHeavy)}, nil
	}
	if in.Jobs != "" && in.Mix != nil {
		return TraceJobs{}, &InputError{"mix", fmt.Errorf("a mix is made of an openb pod list, not a gang-job CSV")}
	}
	if in.Jobs != "" {
		jobs, err := LoadGangJobs(in.Jobs)
		if err != nil {
			return TraceJobs{}, &InputError{"jobs", err}
		}
		if in.Limit > 0 && in.Limit < len(jobs) {
			jobs = jobs[:in.Limit]
		}
		return TraceJobs{Jobs: jobs, File: in.Jobs}, nil
	}
	tasks, err := LoadOpenBTasks(in.Tasks)
	if err != nil {
		return TraceJobs{}, &InputError{"tasks", err}
	}
	if in.Limit > 0 && in.Limit < len(tasks) {
		tasks = tasks[:in.Limit]
	}
	if in.Mix != nil {
		if tasks, err = GenerateMix(tasks, in.Nodes, *in.Mix, nil, in.Seed); err != nil {
			return TraceJobs{}, &InputError{"mix", err}
		}
	}
	var ref []Task
	if needsTimes(tasks) {
		if ref, err = LoadOpenBTasks(in.TimesFrom); err != nil {
			return TraceJobs{}, &InputError{"times-from", err}
		}
	}
	jobs, src, err := OpenBTraceJobs(tasks, ref, in.Seed)
	if err != nil {
		return TraceJobs{}, &InputError{"tasks", err}
	}
	return TraceJobs{Jobs: jobs, File: in.Tasks, Timing: &src, Workload: TypicalWorkload(tasks, TypicalPopularity)}, nil
}

// needsTimes reports whether any task lacks a creation, scheduling or
// deletion time.
func needsTimes(tasks []Task) bool {
	for i := range tasks {
		if tasks[i].Creation == NoTime || tasks[i].Scheduled == NoTime || tasks[i].Deletion == NoTime {
			return true
		}
	}
	return false
}

// TraceSetup is where a trace replay's fleet and jobs come from, as
// `gangway replay trace` takes them.
type TraceSetup struct {
	// Nodes is an openb node list or a synthetic fleet, NxG (LoadNodes,
	// seeded by Input.Seed).
	Nodes string
	// FleetShare keeps this share of the nodes (FleetShare), in (0, 1];
	// 0 with TraceConfig.ETA set searches for the share that loads the
	// fleet (LoadedFleet), 0 without it keeps them all.
	FleetShare float64
	// Input names the jobs; its Nodes are filled with the fleet's.
	Input TraceInput
	// Probe is told each share the search tries (may be nil).
	Probe func(share float64, nodes int, waited, medianWait float64)
}

// PrepareTrace loads s's fleet and jobs into cfg (Nodes, Jobs and
// Options.Workload), sizing the fleet as s.FleetShare says; a bad setting
// is an *InputError naming it.
func PrepareTrace(ctx context.Context, cfg *TraceConfig, s TraceSetup) (TraceJobs, error) {
	if s.FleetShare < 0 || s.FleetShare > 1 {
		return TraceJobs{}, &InputError{"fleet-share", fmt.Errorf("want a share above 0 and at most 1 (0: the default), got %g", s.FleetShare)}
	}
	nodes, err := LoadNodes(s.Nodes, s.Input.Seed)
	if err != nil {
		return TraceJobs{}, &InputError{"nodes", err}
	}
	search := s.FleetShare == 0 && cfg.ETA != nil
	if !search {
		nodes = FleetShare(nodes, s.FleetShare)
	}
	s.Input.Nodes = nodes
	in, err := LoadTraceJobs(s.Input)
	if err != nil {
		return TraceJobs{}, err
	}
	if s.Input.Mix != nil {
		in.Mix = s.Input.Mix.String()
	}
	cfg.Nodes, cfg.Jobs, cfg.Options.Workload = nodes, in.Jobs, in.Workload
	if search {
		share, err := LoadedFleet(ctx, *cfg, func(share, waited, median float64) {
			if s.Probe != nil {
				s.Probe(share, len(FleetShare(nodes, share)), waited, median)
			}
		})
		if err != nil {
			return TraceJobs{}, err
		}
		cfg.Nodes = FleetShare(nodes, share)
	}
	return in, nil
}
