package client

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

func TestWriteGPUHealth(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	node := gangway.Node{ID: "n1", GPUs: []gangway.GPU{
		{Index: 0, UUID: "GPU-a", Healthy: true},
		{Index: 1, UUID: "GPU-b", Healthy: false, Flakiness: 1},
		{Index: 2, UUID: "GPU-c", Healthy: true},
	}}
	health := map[string]map[int]gangway.GPUHealth{"n1": {
		1: {Node: "n1", GPU: 1, FencedAt: now.Add(-2 * time.Minute), Fences: 1, LastFault: &gangway.GPUEvent{
			Kind: "xid", Xid: 79, Meaning: "GPU has fallen off the bus", Blame: "gpu", Jobs: []gangway.JobID{"train"}, At: now.Add(-2 * time.Minute)}},
		2: {Node: "n1", GPU: 2, Healthy: true, LastFault: &gangway.GPUEvent{
			Kind: "xid", Xid: 13, Meaning: "graphics engine exception", Blame: "app", At: now.Add(-time.Hour)}},
	}}
	nodes := []Node{{NodeStatus: gangway.NodeStatus{Node: node, Allocated: map[int]gangway.JobID{2: "notebook"}}, GPUHealth: health["n1"]}}
	var buf bytes.Buffer
	if err := writeGPUHealth(&buf, nodes, false, now); err != nil {
		t.Fatal(err)
	}
	want := `
GPU   UUID   HEALTH           FLAKINESS  JOB       LAST FAULT
n1/1  GPU-b  fenced 2m0s ago  1.00       -         Xid 79 (GPU has fallen off the bus) 2m0s ago, blamed the GPU; jobs train
n1/2  GPU-c  healthy          0.00       notebook  Xid 13 (graphics engine exception) 1h0m0s ago, blamed the application
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	buf.Reset()
	nodes[0].GPUHealth = nil
	if err := writeGPUHealth(&buf, nodes, true, now); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(buf.Bytes(), []byte("\nn1/")); got != 3 {
		t.Errorf("--gpus listed %d GPUs, want 3:\n%s", got, buf.String())
	}
}

// TestWriteNodes: a node's heartbeat age, or "none" for one with no
// heartbeat on record (made silent when its agent shut down).
func TestWriteNodes(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	gpus := []gangway.GPU{{Index: 0, UUID: "GPU-a", Model: "H100", Healthy: true}, {Index: 1, UUID: "GPU-b", Model: "H100", Healthy: true}}
	nodes := []Node{
		{NodeStatus: gangway.NodeStatus{Node: gangway.Node{ID: "n1", Pool: "onprem", GPUs: gpus}, State: gangway.NodeReady,
			LastHeartbeat: now.Add(-2 * time.Second), HeartbeatAge: gangway.Duration{Duration: 2 * time.Second},
			Allocated: map[int]gangway.JobID{1: "train"}}},
		{NodeStatus: gangway.NodeStatus{Node: gangway.Node{ID: "n2", Pool: "onprem", GPUs: gpus}, State: gangway.NodeLost,
			HeartbeatAge: gangway.Duration{Duration: now.Sub(time.UnixMilli(0))}}},
	}
	var buf bytes.Buffer
	if err := WriteNodes(&buf, nodes, false, now); err != nil {
		t.Fatal(err)
	}
	want := "NODE  POOL    MODEL  GPUS  FREE  FENCED  STATE  HEARTBEAT  JOBS\n" +
		"n1    onprem  H100   2     1     0       ready  2s ago     train\n" +
		"n2    onprem  H100   2     2     0       lost   none       \n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestWriteJobs(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		jobs []ListedJob
		want string
	}{
		"none": {want: "no jobs (a user sees its own teams' jobs only)\n"},
		"one waiting": {
			jobs: []ListedJob{{Summary: Summary{JobID: "big", Team: "nlp", GPUs: 16, Phase: gangway.PhaseQueued, StartedAt: now.Add(-time.Minute)},
				Waiting: &gangway.Waiting{ETA: &gangway.ETA{P50: now.Add(10 * time.Minute), P90: now.Add(30 * time.Minute), At: now}}}},
			want: "JOB  TEAM  GPUS  PHASE   SUBMITTED            ETA\n" +
				"big  nlp   16    Queued  " + now.Add(-time.Minute).Local().Format(time.DateTime) + "  in 10m (P90 in 30m)\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteJobs(&b, tc.jobs, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("WriteJobs (-want +got):\n%s", diff)
			}
		})
	}
}
