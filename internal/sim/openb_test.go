package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// traceDir is the shared trace copy, relative to this package.
const traceDir = "../../../shared/traces/openb"

func tracePath(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(traceDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("trace %s: %v (benchmarks and tests read ../shared/traces/ from the project root)", name, err)
	}
	return p
}

func TestLoadOpenBNodesRealFiles(t *testing.T) {
	tests := map[string]struct {
		wantNodes, wantGPUs, wantCPUOnly int
	}{
		"openb_node_list_gpu_node.csv": {wantNodes: 1213, wantGPUs: 6212},
		"openb_node_list_all_node.csv": {wantNodes: 1523, wantGPUs: 6212, wantCPUOnly: 310},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nodes, err := LoadOpenBNodes(tracePath(t, name))
			if err != nil {
				t.Fatal(err)
			}
			gpus, cpuOnly := 0, 0
			for _, n := range nodes {
				gpus += len(n.GPUs)
				if len(n.GPUs) == 0 {
					cpuOnly++
				}
				if n.Pool != OpenBPool || !n.Schedulable {
					t.Fatalf("node %s: pool %q schedulable %v, want %q true", n.ID, n.Pool, n.Schedulable, OpenBPool)
				}
				for i, g := range n.GPUs {
					if g.Index != i || g.Model != n.Model || !g.Healthy {
						t.Fatalf("node %s GPU %d = %+v, want index %d model %s healthy", n.ID, i, g, i, n.Model)
					}
				}
			}
			if len(nodes) != tc.wantNodes || gpus != tc.wantGPUs || cpuOnly != tc.wantCPUOnly {
				t.Errorf("got %d nodes, %d GPUs, %d CPU-only; want %d, %d, %d", len(nodes), gpus, cpuOnly,
					tc.wantNodes, tc.wantGPUs, tc.wantCPUOnly)
			}
		})
	}
}

func TestLoadOpenBNodesFirstRow(t *testing.T) {
	nodes, err := LoadOpenBNodes(tracePath(t, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := placement.Node{ID: "openb-node-0000", Pool: OpenBPool, CapacityType: "on-prem", Model: "P100",
		CPUMilli: 64000, MemMiB: 262144, Schedulable: true,
		GPUs: []placement.GPU{{Index: 0, Model: "P100", Healthy: true}, {Index: 1, Model: "P100", Healthy: true}}}
	if diff := cmp.Diff(want, nodes[0]); diff != "" {
		t.Errorf("first node (-want +got):\n%s", diff)
	}
}

func TestLoadOpenBTasksRealFiles(t *testing.T) {
	tests := map[string]struct {
		wantTasks  int
		wantTimes  bool // has creation/deletion times
		wantModels bool // some tasks carry a model constraint
	}{
		"openb_pod_list_default.csv":    {wantTasks: 8152, wantTimes: true},
		"openb_pod_list_cpu050.csv":     {wantTasks: 7439, wantTimes: true},
		"openb_pod_list_gpushare40.csv": {wantTasks: 8152, wantTimes: true},
		"openb_pod_list_gpuspec10.csv":  {wantTasks: 8152, wantTimes: true, wantModels: true},
		"openb_pod_list_multigpu20.csv": {wantTasks: 8324},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tasks, err := LoadOpenBTasks(tracePath(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if len(tasks) != tc.wantTasks {
				t.Errorf("got %d tasks, want %d", len(tasks), tc.wantTasks)
			}
			times, models := false, false
			for _, task := range tasks {
				times = times || task.Creation != NoTime
				models = models || len(task.Models) > 0
				j := task.Job()
				if j.GPUMilliTotal() != task.GPUMilliTotal() {
					t.Fatalf("task %s: job demand %d, task demand %d", task.Name, j.GPUMilliTotal(), task.GPUMilliTotal())
				}
			}
			if times != tc.wantTimes || models != tc.wantModels {
				t.Errorf("times %v, models %v; want %v, %v", times, models, tc.wantTimes, tc.wantModels)
			}
		})
	}
}

func TestLoadOpenBTasksColumns(t *testing.T) {
	tasks, err := LoadOpenBTasks(tracePath(t, "openb_pod_list_default.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := Task{Name: "openb-pod-0001", CPUMilli: 6000, MemMiB: 12288, NumGPU: 1, GPUMilli: 460, QoS: "LS", Phase: "Running",
		Creation: 427061, Deletion: 12902960, Scheduled: 427061}
	if diff := cmp.Diff(want, tasks[1]); diff != "" {
		t.Errorf("second task (-want +got):\n%s", diff)
	}
}

func TestTaskJob(t *testing.T) {
	tests := map[string]struct {
		task Task
		want gangway.QueueEntry
	}{
		"gpu share": {
			task: Task{Name: "s", CPUMilli: 6000, MemMiB: 100, NumGPU: 1, GPUMilli: 460},
			want: gangway.QueueEntry{JobID: "s", Replicas: 1, GPUsPerReplica: 1, GPUMilli: 460, CPUMilli: 6000, MemMiB: 100},
		},
		"one whole gpu": {
			task: Task{Name: "w", CPUMilli: 1, NumGPU: 1, GPUMilli: 1000, Models: []string{"T4"}},
			want: gangway.QueueEntry{JobID: "w", Replicas: 1, GPUsPerReplica: 1, CPUMilli: 1, GPUModels: []string{"T4"}},
		},
		"eight gpus on one node": {
			task: Task{Name: "e", NumGPU: 8, GPUMilli: 1000},
			want: gangway.QueueEntry{JobID: "e", Replicas: 1, GPUsPerReplica: 8},
		},
		"cpu only": {
			task: Task{Name: "c", CPUMilli: 32000, MemMiB: 65536},
			want: gangway.QueueEntry{JobID: "c", Replicas: 1, CPUMilli: 32000, MemMiB: 65536},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.task.Job()); diff != "" {
				t.Errorf("Job() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadOpenBBadFiles(t *testing.T) {
	const podHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	const nodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n"
	tests := map[string]struct {
		nodes   bool // a node list (else a pod list)
		content string
		wantErr string // with FILE for the file's path
	}{
		"missing column": {
			content: "name,cpu_milli,memory_mib,gpu_milli\np,1,1,0\n",
			wantErr: "FILE:1: missing column num_gpu (header has name,cpu_milli,memory_mib,gpu_milli)",
		},
		"missing node columns": {
			nodes:   true,
			content: "sn,cpu_milli\nn,1\n",
			wantErr: "FILE:1: missing column memory_mib, gpu, model (header has sn,cpu_milli)",
		},
		"num_gpu not an integer": {
			content: podHeader + "p0,1000,1024,1,1000,,LS,Running,0,10,0\np1,1000,1024,x,1000,,LS,Running,0,10,0\n",
			wantErr: `FILE:3: num_gpu: want an integer, got "x"`,
		},
		"gpu_milli above a gpu": {
			content: podHeader + "p0,1000,1024,1,1200,,LS,Running,0,10,0\n",
			wantErr: "FILE:2: gpu_milli: want 0-1000, got 1200",
		},
		"negative cpu": {
			content: podHeader + "p0,-5,1024,0,0,,LS,Running,0,10,0\n",
			wantErr: "FILE:2: cpu_milli: want at least 0, got -5",
		},
		"share of several gpus": {
			content: podHeader + "p0,1,1,2,500,,LS,Running,0,10,0\n",
			wantErr: "FILE:2: gpu_milli: want 1000 for a task with num_gpu 2 (shares of several GPUs are not supported), got 500",
		},
		"gpu task without gpu_milli": {
			content: podHeader + "p0,1,1,1,0,,LS,Running,0,10,0\n",
			wantErr: "FILE:2: gpu_milli: want 1-1000 for a task with num_gpu 1, got 0",
		},
		"bad time": {
			content: podHeader + "p0,1,1,0,0,,LS,Running,soon,10,0\n",
			wantErr: `FILE:2: creation_time: want an integer, got "soon"`,
		},
		"short row": {
			content: "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1\n",
			wantErr: "FILE:2: num_gpu: want 5 fields, got 3",
		},
		"empty pod list": {
			content: "",
			wantErr: "FILE: empty file, want a header line",
		},
		"header only": {
			content: podHeader,
			wantErr: "FILE: no tasks",
		},
		"node gpu count": {
			nodes:   true,
			content: nodeHeader + "n0,1000,1024,2,T4\nn1,1000,1024,two,T4\n",
			wantErr: `FILE:3: gpu: want an integer, got "two"`,
		},
		"unterminated quote": {
			content: podHeader + "p0,1,1,0,0,,LS,Running,0,10,0\n\"p1,1,1,0,0\n",
			wantErr: `FILE:3: extraneous or missing " in quoted-field`,
		},
		"unterminated quote in the first row": {
			nodes:   true,
			content: nodeHeader + "\"n0,1000,1024,2,T4\n",
			wantErr: `FILE:2: extraneous or missing " in quoted-field`,
		},
		"duplicate node": {
			nodes:   true,
			content: nodeHeader + "n0,1000,1024,2,T4\nn0,1000,1024,2,T4\n",
			wantErr: `FILE:3: sn: node "n0" already listed on line 2`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := "openb_pod_list_x.csv"
			if tc.nodes {
				file = "openb_node_list_x.csv"
			}
			path := filepath.Join(t.TempDir(), file)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			if tc.nodes {
				_, err = LoadOpenBNodes(path)
			} else {
				_, err = LoadOpenBTasks(path)
			}
			want := strings.ReplaceAll(tc.wantErr, "FILE", path)
			if err == nil || err.Error() != want {
				t.Errorf("error = %v\nwant    %s", err, want)
			}
		})
	}
}

func TestLoadOpenBTasksFiveColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "openb_pod_list_multigpu.csv")
	content := "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,8000,30517,8,1000\np1,100,1,0,0\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks, err := LoadOpenBTasks(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{
		{Name: "p0", CPUMilli: 8000, MemMiB: 30517, NumGPU: 8, GPUMilli: 1000, Creation: NoTime, Deletion: NoTime, Scheduled: NoTime},
		{Name: "p1", CPUMilli: 100, MemMiB: 1, Creation: NoTime, Deletion: NoTime, Scheduled: NoTime},
	}
	if diff := cmp.Diff(want, tasks); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
}
