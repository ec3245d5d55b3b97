package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

func TestReadGangJobs(t *testing.T) {
	const content = "team,submit_time,replicas,gpus_per_replica,gpu_model,duration,priority\n" +
		"nlp,30,4,8,H100,3600,100\n" +
		"vision,0.5,1,1,,60,0\n" +
		"research,30,2,2,A100|H100,1.25,-5\n"
	jobs, err := ReadGangJobs(strings.NewReader(content), "jobs.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceJob{
		{Job: gangway.QueueEntry{JobID: "job-3", Team: "vision", Replicas: 1, GPUsPerReplica: 1}, Submit: 500 * time.Millisecond, Duration: time.Minute},
		{Job: gangway.QueueEntry{JobID: "job-2", Team: "nlp", Replicas: 4, GPUsPerReplica: 8, GPUModels: []string{"H100"}, Priority: 100},
			Submit: 30 * time.Second, Duration: time.Hour},
		{Job: gangway.QueueEntry{JobID: "job-4", Team: "research", Replicas: 2, GPUsPerReplica: 2, GPUModels: []string{"A100", "H100"}, Priority: -5},
			Submit: 30 * time.Second, Duration: 1250 * time.Millisecond},
	}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("jobs in submit order (-want +got):\n%s", diff)
	}
}

func TestReadGangJobsOptionalColumns(t *testing.T) {
	const content = "submit_time,team,replicas,gpus_per_replica,gpu_model,duration,priority,id,preemptible,cpu_milli,memory_mib\n" +
		"0,a,1,2,,10,0,train-1,true,4000,8192\n" +
		"0,a,1,2,,10,0,train-2,,,\n"
	jobs, err := ReadGangJobs(strings.NewReader(content), "jobs.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []gangway.QueueEntry{
		{JobID: "train-1", Team: "a", Replicas: 1, GPUsPerReplica: 2, Preemptible: true, CPUMilli: 4000, MemMiB: 8192},
		{JobID: "train-2", Team: "a", Replicas: 1, GPUsPerReplica: 2},
	}
	got := []gangway.QueueEntry{jobs[0].Job, jobs[1].Job}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

func TestReadGangJobsErrors(t *testing.T) {
	const header = "submit_time,team,replicas,gpus_per_replica,gpu_model,duration,priority\n"
	tests := map[string]struct {
		content string
		wantErr string
	}{
		"empty":                {content: "", wantErr: "jobs.csv: empty file, want a header line"},
		"no jobs":              {content: header, wantErr: "jobs.csv: no jobs"},
		"missing column":       {content: "submit_time,team,replicas,gpus_per_replica,gpu_model,priority\n0,a,1,1,,0\n", wantErr: "jobs.csv:1: missing column duration (header has submit_time,team,replicas,gpus_per_replica,gpu_model,priority)"},
		"bad replicas":         {content: header + "0,a,1,1,,10,0\n0,a,zero,1,,10,0\n", wantErr: `jobs.csv:3: replicas: want an integer, got "zero"`},
		"no replicas":          {content: header + "0,a,0,1,,10,0\n", wantErr: "jobs.csv:2: replicas: want 1-1048576, got 0"},
		"zero duration":        {content: header + "0,a,1,1,,0,0\n", wantErr: "jobs.csv:2: duration: want above 0 seconds, got 0"},
		"negative time":        {content: header + "-1,a,1,1,,10,0\n", wantErr: "jobs.csv:2: submit_time: want at least 0 seconds, got -1"},
		"bad time":             {content: header + "soon,a,1,1,,10,0\n", wantErr: `jobs.csv:2: submit_time: want a number of seconds, got "soon"`},
		"time past a Duration": {content: header + "1e11,a,1,1,,10,0\n", wantErr: "jobs.csv:2: submit_time: want at most 1e+09 seconds, got 1e11"},
		"endless duration":     {content: header + "0,a,1,1,,+Inf,0\n", wantErr: "jobs.csv:2: duration: want at most 1e+09 seconds, got +Inf"},
		"short row":            {content: header + "0,a,1,1\n", wantErr: "jobs.csv:2: gpu_model: want 7 fields, got 4"},
		"bad preemptible": {content: "submit_time,team,replicas,gpus_per_replica,gpu_model,duration,priority,preemptible\n0,a,1,1,,10,0,maybe\n",
			wantErr: `jobs.csv:2: preemptible: want true or false, got "maybe"`},
		"duplicate id": {content: "submit_time,team,replicas,gpus_per_replica,gpu_model,duration,priority,id\n0,a,1,1,,10,0,x\n0,a,1,1,,10,0,x\n",
			wantErr: `jobs.csv:3: id: job "x" already listed on line 2`},
		"unterminated quote": {content: header + "0,\"a,1,1,,10,0\n", wantErr: `jobs.csv:2: extraneous or missing " in quoted-field`},
		"unquoted quote":     {content: header + "0,a\"b,1,1,,10,0\n", wantErr: `jobs.csv:2: bare " in non-quoted-field`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ReadGangJobs(strings.NewReader(tc.content), "jobs.csv")
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// exampleConfig replays the example gang-job file and node list in
// testdata under policies, with reservations, preemption and checkpoints.
func exampleConfig(t *testing.T, policies ...string) TraceConfig {
	t.Helper()
	jobs, err := LoadGangJobs(filepath.Join("testdata", "gangs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := LoadNodes(filepath.Join("testdata", "nodes.csv"), 1)
	if err != nil {
		t.Fatal(err)
	}
	return TraceConfig{Nodes: nodes, Jobs: jobs, Policies: policies, NewScorer: baselines.ScorerByName, Seed: 1,
		CheckpointEvery: DefaultCheckpointEvery,
		Options:         placement.Options{Reservations: 4, Preempt: true, MinRuntime: 10 * time.Minute}}
}

// The example gang-job file and node list in testdata load and replay.
func TestLoadGangJobsExample(t *testing.T) {
	cfg := exampleConfig(t, TracePolicies...)
	jobs := cfg.Jobs
	res, err := RunTrace(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if r.Placed+r.NeverPlaced != len(jobs) || r.Finished != r.Placed || r.Unfinished != 0 {
			t.Errorf("%s: placed %d + never %d != %d jobs, or finished %d unfinished %d", r.Policy, r.Placed, r.NeverPlaced,
				len(jobs), r.Finished, r.Unfinished)
		}
	}
	if _, err := LoadGangJobs(filepath.Join("testdata", "missing.csv")); !os.IsNotExist(err) {
		t.Errorf("missing file: error %v, want not exist", err)
	}
}

func TestOpenBTraceJobs(t *testing.T) {
	tasks := []Task{
		{Name: "ls", NumGPU: 1, GPUMilli: 1000, QoS: "LS", Creation: 10, Scheduled: 12, Deletion: 112},
		{Name: "be", NumGPU: 1, GPUMilli: 500, QoS: "BE", Creation: 5, Scheduled: 5, Deletion: 65},
		{Name: "burst", QoS: "Burstable", CPUMilli: 2000, Creation: 7, Scheduled: 7, Deletion: 8},
	}
	jobs, src, err := OpenBTraceJobs(tasks, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceJob{
		{Job: gangway.QueueEntry{JobID: "be", Replicas: 1, GPUsPerReplica: 1, GPUMilli: 500, Preemptible: true, Priority: OpenBPriorityBestEffort},
			Submit: 5 * time.Second, Duration: time.Minute},
		{Job: gangway.QueueEntry{JobID: "burst", Replicas: 1, CPUMilli: 2000, Priority: OpenBPriorityBurstable}, Submit: 7 * time.Second, Duration: time.Second},
		{Job: gangway.QueueEntry{JobID: "ls", Replicas: 1, GPUsPerReplica: 1, Priority: OpenBPriorityLS}, Submit: 10 * time.Second, Duration: 100 * time.Second},
	}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if src != (TimingSource{FromTrace: 3}) {
		t.Errorf("timing %+v, want all 3 from the trace", src)
	}
	if _, _, err := OpenBTraceJobs([]Task{{Name: "x", Creation: NoTime, Scheduled: NoTime, Deletion: NoTime}}, nil, 1); err == nil {
		t.Error("a task without times and no reference: want an error")
	}
}

// multigpu20 has no times: arrivals and durations are drawn from the
// default trace, the same for the same seed, different for another.
func TestOpenBTraceJobsDrawnTimes(t *testing.T) {
	_, ref := loadDefault(t)
	tasks, err := LoadOpenBTasks(tracePath(t, "openb_pod_list_multigpu20.csv"))
	if err != nil {
		t.Fatal(err)
	}
	tasks = tasks[:500]
	a, src, err := OpenBTraceJobs(tasks, ref, 42)
	if err != nil {
		t.Fatal(err)
	}
	if src != (TimingSource{DrawnArrivals: 500, DrawnDurations: 500}) {
		t.Errorf("timing %+v, want every arrival and duration drawn", src)
	}
	b, _, _ := OpenBTraceJobs(tasks, ref, 42)
	c, _, _ := OpenBTraceJobs(tasks, ref, 43)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("seed 42 twice differs:\n%s", diff)
	}
	if cmp.Equal(a, c) {
		t.Error("seeds 42 and 43 drew the same times")
	}
	gaps, durs := timeDistributions(ref)
	inDurs := map[time.Duration]bool{}
	for _, d := range durs {
		inDurs[d] = true
	}
	for i := 1; i < len(a); i++ {
		if a[i].Submit < a[i-1].Submit {
			t.Fatalf("jobs not in submit order at %d", i)
		}
	}
	for _, j := range a {
		if !inDurs[j.Duration] {
			t.Fatalf("job %s: duration %s is not one of the default trace's", j.Job.JobID, j.Duration)
		}
	}
	if len(gaps) != len(ref)-1 {
		t.Errorf("%d gaps from %d tasks, want %d", len(gaps), len(ref), len(ref)-1)
	}
}
