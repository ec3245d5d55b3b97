package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// TraceJob is one job of a dynamic replay: what it asks for, when it is
// submitted and how long it runs once started.
type TraceJob struct {
	// Job is the queue entry placement sees: ID, team, priority,
	// preemptibility and shape. The replay sets SubmittedAt, Attempt and
	// MaxRuntime itself.
	Job gangway.QueueEntry
	// Submit is when the job arrives, from the start of the trace.
	Submit time.Duration
	// Duration is how long the job runs once started (its work).
	Duration time.Duration
}

// GPUs is the number of GPUs (whole or shared) the job holds while it runs.
func (tj *TraceJob) GPUs() int { return tj.Job.Replicas * tj.Job.GPUsPerReplica }

// Priorities and preemptibility the openb QoS classes map to. The trace
// carries no priorities; Alibaba's classes order them: latency-sensitive
// (LS) and Guaranteed pods above Burstable, best-effort (BE) pods lowest
// and the only ones that may be preempted.
const (
	OpenBPriorityLS         = 100
	OpenBPriorityBurstable  = 50
	OpenBPriorityBestEffort = 0
)

func openBPriority(qos string) (prio int, preemptible bool) {
	switch strings.ToLower(qos) {
	case "be", "besteffort":
		return OpenBPriorityBestEffort, true
	case "burstable":
		return OpenBPriorityBurstable, false
	}
	return OpenBPriorityLS, false
}

// TimingSource says where each job's times came from.
type TimingSource struct {
	// FromTrace counts jobs whose arrival and duration are the trace's.
	FromTrace int
	// DrawnArrivals and DrawnDurations count jobs whose arrival (the
	// trace has no creation time) or duration (no scheduled or deletion
	// time: multigpu20, or a pod that was still pending) were drawn from
	// the reference distribution.
	DrawnArrivals, DrawnDurations int
}

// OpenBTraceJobs turns an openb pod list into trace jobs: arrival at
// creation_time, duration deletion_time − scheduled_time, priority and
// preemptibility from qos. Where a task has no times, they are drawn,
// seeded, from ref's empirical distributions (the default pod list): an
// arrival is the previous arrival plus an inter-arrival gap drawn from
// ref's, a duration one of ref's durations. Jobs come back in arrival order
// (ties: file order).
func OpenBTraceJobs(tasks, ref []Task, seed uint64) ([]TraceJob, TimingSource, error) {
	var gaps, durs []time.Duration
	var src TimingSource
	needGaps, needDurs := false, false
	for i := range tasks {
		needGaps = needGaps || tasks[i].Creation == NoTime
		needDurs = needDurs || !hasDuration(&tasks[i])
	}
	if needGaps || needDurs {
		gaps, durs = timeDistributions(ref)
		if (needGaps && len(gaps) == 0) || (needDurs && len(durs) == 0) {
			return nil, src, fmt.Errorf("some tasks have no times and the reference trace has none to draw from")
		}
	}
	rnd := rand.New(rand.NewPCG(seed, 0x7261636573696d)) // "tracesim"
	jobs := make([]TraceJob, len(tasks))
	var last time.Duration
	for i := range tasks {
		t := &tasks[i]
		j := t.Job()
		j.Priority, j.Preemptible = openBPriority(t.QoS)
		tj := TraceJob{Job: j}
		drawn := false
		if t.Creation == NoTime {
			tj.Submit = last + gaps[rnd.IntN(len(gaps))]
			src.DrawnArrivals++
			drawn = true
		} else {
			tj.Submit = time.Duration(t.Creation) * time.Second
		}
		last = tj.Submit
		if hasDuration(t) {
			tj.Duration = time.Duration(t.Deletion-t.Scheduled) * time.Second
		} else {
			tj.Duration = durs[rnd.IntN(len(durs))]
			src.DrawnDurations++
			drawn = true
		}
		if !drawn {
			src.FromTrace++
		}
		jobs[i] = tj
	}
	slices.SortStableFunc(jobs, func(a, b TraceJob) int { return compareDur(a.Submit, b.Submit) })
	return jobs, src, nil
}

func hasDuration(t *Task) bool {
	return t.Scheduled != NoTime && t.Deletion != NoTime && t.Deletion >= t.Scheduled
}

// timeDistributions are a trace's inter-arrival gaps (between tasks in
// creation order) and run times (deletion − scheduled).
func timeDistributions(ref []Task) (gaps, durs []time.Duration) {
	var created []int64
	for i := range ref {
		t := &ref[i]
		if t.Creation != NoTime {
			created = append(created, t.Creation)
		}
		if hasDuration(t) {
			durs = append(durs, time.Duration(t.Deletion-t.Scheduled)*time.Second)
		}
	}
	slices.Sort(created)
	for k := 1; k < len(created); k++ {
		gaps = append(gaps, time.Duration(created[k]-created[k-1])*time.Second)
	}
	return gaps, durs
}

func compareDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// GangCSVColumns are the required columns of a gang-job CSV file.
var GangCSVColumns = []string{"submit_time", "team", "replicas", "gpus_per_replica", "gpu_model", "duration", "priority"}

// LoadGangJobs reads a gang-job CSV file: a header line naming at least
// the columns submit_time, team, replicas, gpus_per_replica, gpu_model,
// duration and priority (any order), then one job per line.
//
//   - submit_time: seconds from the start of the trace (integer or
//     decimal, >= 0);
//   - team: any name (fair share and quotas are per team; may be empty);
//   - replicas: gang members, >= 1; all start together or none does;
//   - gpus_per_replica: whole GPUs per member, >= 1, all on one node;
//   - gpu_model: the GPU model required, "" for any, several as "A|B";
//   - duration: seconds the job runs once started, > 0;
//   - priority: integer; higher goes first and may preempt lower.
//
// Optional columns: id (unique; default "job-<line>"), preemptible (true
// or false, default false), cpu_milli and memory_mib (per member, default
// 0). Rows need not be sorted; jobs come back in submit order. Errors name
// the file and line.
func LoadGangJobs(path string) ([]TraceJob, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadGangJobs(f, path)
}

// ReadGangJobs is LoadGangJobs on a reader; name is used in errors.
func ReadGangJobs(r io.Reader, name string) ([]TraceJob, error) {
	t, err := newTable(r, name, GangCSVColumns)
	if err != nil {
		return nil, err
	}
	var jobs []TraceJob
	seen := map[string]int{}
	for t.next() {
		id := t.str("id")
		if id == "" {
			id = fmt.Sprintf("job-%d", t.line)
		}
		j := gangway.QueueEntry{
			JobID:          id,
			Team:           t.str("team"),
			Replicas:       int(t.int64("replicas", 1, 1<<20)),
			GPUsPerReplica: int(t.int64("gpus_per_replica", 1, 1024)),
			GPUModels:      splitModels(t.str("gpu_model")),
			Priority:       int(t.int64("priority", -1<<31, 1<<31-1)),
		}
		tj := TraceJob{Submit: t.seconds("submit_time", false), Duration: t.seconds("duration", true)}
		if _, ok := t.col["cpu_milli"]; ok && t.str("cpu_milli") != "" {
			j.CPUMilli = t.int64("cpu_milli", 0, -1)
		}
		if _, ok := t.col["memory_mib"]; ok && t.str("memory_mib") != "" {
			j.MemMiB = t.int64("memory_mib", 0, -1)
		}
		if s := t.str("preemptible"); s != "" && t.err == nil {
			b, err := strconv.ParseBool(s)
			if err != nil {
				t.fail("preemptible", fmt.Sprintf("want true or false, got %q", s))
			}
			j.Preemptible = b
		}
		if line, dup := seen[id]; dup && t.err == nil {
			t.fail("id", fmt.Sprintf("job %q already listed on line %d", id, line))
		}
		if t.err != nil {
			return nil, t.err
		}
		seen[id] = t.line
		tj.Job = j
		jobs = append(jobs, tj)
	}
	if t.err != nil {
		return nil, t.err
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%s: no jobs", name)
	}
	slices.SortStableFunc(jobs, func(a, b TraceJob) int { return compareDur(a.Submit, b.Submit) })
	return jobs, nil
}

// maxTraceSeconds bounds a time in a trace (about 31 years) well inside
// what a time.Duration holds (292 years): beyond it the conversion would
// overflow into a negative duration.
const maxTraceSeconds = 1e9

// seconds parses column c as a number of seconds (integer or decimal),
// at least 0, or above 0 when positive is set.
func (t *table) seconds(c string, positive bool) time.Duration {
	s := t.str(c)
	if t.err != nil {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != v {
		t.fail(c, fmt.Sprintf("want a number of seconds, got %q", s))
		return 0
	}
	if v > maxTraceSeconds {
		t.fail(c, fmt.Sprintf("want at most %g seconds, got %s", float64(maxTraceSeconds), s))
		return 0
	}
	if v < 0 || (positive && v == 0) {
		want := "at least 0"
		if positive {
			want = "above 0"
		}
		t.fail(c, fmt.Sprintf("want %s seconds, got %s", want, s))
		return 0
	}
	return time.Duration(v * float64(time.Second))
}

// LoadNodes reads a node list, or builds a synthetic fleet when spec is
// "NxG" (N nodes of G GPUs, as SyntheticFleet).
func LoadNodes(spec string, seed uint64) ([]placement.Node, error) {
	if fs, ok, err := ParseFleetSpec(spec); ok {
		if err != nil {
			return nil, err
		}
		return SyntheticFleet(fs, seed), nil
	}
	return LoadOpenBNodes(spec)
}
