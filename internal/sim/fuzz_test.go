package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gangwayhq/gangway/placement"
)

// The CSV parsers never panic, report a bad file as an error naming it,
// and what they accept keeps the rules they document. Regression inputs
// are in testdata/fuzz/Fuzz*.

func FuzzReadOpenBTasks(f *testing.F) {
	addCSVSeeds(f, filepath.Join(traceDir, "openb_pod_list_default.csv"),
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\np1,0,0,0,0\n",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np0,1000,1024,2,1000,V100M16|T4,LS,Running,0,10,\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		tasks, err := ReadOpenBTasks(bytes.NewReader(data), "pods.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pods.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, task := range tasks {
			switch {
			case task.Name == "" || task.CPUMilli < 0 || task.MemMiB < 0:
				t.Fatalf("accepted task %+v", task)
			case task.NumGPU == 0 && task.GPUMilli != 0,
				task.NumGPU > 0 && (task.GPUMilli < 1 || task.GPUMilli > placement.Whole),
				task.NumGPU > 1 && task.GPUMilli != placement.Whole:
				t.Fatalf("accepted task %+v breaks the GPU rules", task)
			}
			if j := task.Job(); j.Replicas != 1 || j.GPUsPerReplica < 0 {
				t.Fatalf("task %+v as a job: %+v", task, j)
			}
		}
	})
}

func FuzzReadOpenBNodes(f *testing.F) {
	addCSVSeeds(f, filepath.Join(traceDir, "openb_node_list_gpu_node.csv"),
		"sn,cpu_milli,memory_mib,gpu,model\nn0,96000,786432,8,V100M32\nn1,1000,1024,0,\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ReadOpenBNodes(bytes.NewReader(data), "nodes.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "nodes.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			if n.ID == "" || seen[n.ID] || n.CPUMilli < 0 || n.MemMiB < 0 || len(n.GPUs) > 1024 {
				t.Fatalf("accepted node %+v", n)
			}
			seen[n.ID] = true
		}
	})
}

func FuzzReadGangJobs(f *testing.F) {
	addCSVSeeds(f, "testdata/gangs.csv",
		"submit_time,team,replicas,gpus_per_replica,gpu_model,duration,priority,id,preemptible,cpu_milli,memory_mib\n0.5,a,2,8,H100|A100,3600,1,j1,true,1000,\n",
		"submit_time,team,replicas,gpus_per_replica,gpu_model,duration,priority\n1.5e2,a,1,1,,3.6e3,0\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := ReadGangJobs(bytes.NewReader(data), "jobs.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "jobs.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		seen := map[string]bool{}
		for i, j := range jobs {
			switch {
			case j.Job.JobID == "" || seen[j.Job.JobID]:
				t.Fatalf("job %d: id %q empty or repeated", i, j.Job.JobID)
			case j.Job.Replicas < 1 || j.Job.GPUsPerReplica < 1 || j.Submit < 0 || j.Duration <= 0:
				t.Fatalf("accepted job %+v", j)
			case i > 0 && j.Submit < jobs[i-1].Submit:
				t.Fatalf("job %d submitted before job %d", i, i-1)
			}
			seen[j.Job.JobID] = true
		}
	})
}

// addCSVSeeds adds the head of a real file (when present: the shared
// traces may be absent) and the given inputs.
func addCSVSeeds(f *testing.F, file string, inputs ...string) {
	if data, err := os.ReadFile(file); err == nil {
		lines := bytes.SplitAfterN(data, []byte("\n"), 21)
		f.Add(bytes.Join(lines[:min(20, len(lines))], nil))
	}
	for _, in := range inputs {
		f.Add([]byte(in))
	}
}
