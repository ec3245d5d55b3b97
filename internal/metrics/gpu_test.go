package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestGPU(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewGPU(reg)
	nan := math.NaN()
	n1 := NodeLabels{Node: "n1", Pool: "onprem"}
	m.Node(n1)
	m.Readings(n1, []GPUReading{
		{Index: 0, UUID: "GPU-a", Model: "H100", Team: "nlp", Utilization: 0.93, SMActivity: 0.71, MemUsedB: 70e9, TempC: 61, PowerW: 650.5, Healthy: true},
		{Index: 1, UUID: "GPU-b", Model: "H100", Team: "", Utilization: nan, SMActivity: nan, MemUsedB: nan, TempC: nan, PowerW: nan, Healthy: false},
	})
	// The next sample: GPU 0's job ended and a notebook of team vision
	// holds it idle; the nlp series goes.
	m.Readings(n1, []GPUReading{
		{Index: 0, UUID: "GPU-a", Model: "H100", Team: "vision", Utilization: 0.01, SMActivity: nan, MemUsedB: 1e9, TempC: 40, PowerW: 90, Healthy: true, IdleFor: 20 * time.Minute},
		{Index: 1, UUID: "GPU-b", Model: "H100", Utilization: nan, SMActivity: nan, MemUsedB: nan, TempC: nan, PowerW: nan, Healthy: false},
	})
	m.Fault(n1, 1, "GPU-b", "H100", "nlp", "xid", "gpu", 79)
	m.Fault(n1, 1, "GPU-b", "H100", "nlp", "ecc-dbe", "gpu", 0)
	m.Reclaimed("n1", ReclaimZombie, 1)
	m.Reclaimed("n1", ReclaimIdle, 4)
	m.HeartbeatAge("n1", 1500*time.Millisecond)
	var nilGPU *GPU
	nilGPU.Fault(n1, 0, "", "", "", "xid", "gpu", 13) // no panic

	want := `
# HELP gangway_gpu_healthy 1 while the GPU is in service, 0 once a hardware fault fenced it.
# TYPE gangway_gpu_healthy gauge
gangway_gpu_healthy{gpu="0",model="H100",node="n1",pool="onprem",team="vision",uuid="GPU-a"} 1
gangway_gpu_healthy{gpu="1",model="H100",node="n1",pool="onprem",team="",uuid="GPU-b"} 0
# HELP gangway_gpu_idle_seconds How long the job on the GPU has kept it below its idle threshold (0 when busy or free).
# TYPE gangway_gpu_idle_seconds gauge
gangway_gpu_idle_seconds{gpu="0",model="H100",node="n1",pool="onprem",team="vision",uuid="GPU-a"} 1200
gangway_gpu_idle_seconds{gpu="1",model="H100",node="n1",pool="onprem",team="",uuid="GPU-b"} 0
# HELP gangway_gpu_utilization_ratio Share of the last sample period a kernel ran on the GPU (0-1). Absent where NVML does not report it (MIG devices, synthetic GPUs).
# TYPE gangway_gpu_utilization_ratio gauge
gangway_gpu_utilization_ratio{gpu="0",model="H100",node="n1",pool="onprem",team="vision",uuid="GPU-a"} 0.01
# HELP gangway_gpu_power_watts GPU power draw.
# TYPE gangway_gpu_power_watts gauge
gangway_gpu_power_watts{gpu="0",model="H100",node="n1",pool="onprem",team="vision",uuid="GPU-a"} 90
# HELP gangway_gpu_xid_errors_total Xid errors the GPU reported, by Xid code.
# TYPE gangway_gpu_xid_errors_total counter
gangway_gpu_xid_errors_total{gpu="1",model="H100",node="n1",pool="onprem",team="nlp",uuid="GPU-b",xid="79"} 1
# HELP gangway_gpu_faults_total Faults the GPU reported, by kind (xid, ecc-dbe, ecc-uncorrectable, row-remap-failure, row-remap-pending, gpu-lost) and blame (gpu, app, none).
# TYPE gangway_gpu_faults_total counter
gangway_gpu_faults_total{blame="gpu",gpu="1",kind="ecc-dbe",model="H100",node="n1",pool="onprem",team="nlp",uuid="GPU-b"} 1
gangway_gpu_faults_total{blame="gpu",gpu="1",kind="xid",model="H100",node="n1",pool="onprem",team="nlp",uuid="GPU-b"} 1
# HELP gangway_gpu_reclaims_total GPUs taken back by the agent, by kind: zombie (a process no task owned, killed), orphan (a task whose workflow was gone, stopped), idle (released by the job's idle policy).
# TYPE gangway_gpu_reclaims_total counter
gangway_gpu_reclaims_total{kind="idle",node="n1"} 4
gangway_gpu_reclaims_total{kind="orphan",node="n1"} 0
gangway_gpu_reclaims_total{kind="zombie",node="n1"} 1
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{Hostname="n1",UUID="GPU-a",device="nvidia0",gpu="0",modelName="H100"} 1
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{Hostname="n1",UUID="GPU-a",device="nvidia0",gpu="0",modelName="H100"} 953.67431640625
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{Hostname="n1",UUID="GPU-a",device="nvidia0",gpu="0",modelName="H100"} 0
DCGM_FI_DEV_XID_ERRORS{Hostname="n1",UUID="GPU-b",device="nvidia1",gpu="1",modelName="H100"} 79
# HELP gangway_node_heartbeat_age_seconds Time since the node last heartbeated to the Redis view successfully.
# TYPE gangway_node_heartbeat_age_seconds gauge
gangway_node_heartbeat_age_seconds{node="n1"} 1.5
`
	names := []string{"gangway_gpu_healthy", "gangway_gpu_idle_seconds", "gangway_gpu_utilization_ratio", "gangway_gpu_power_watts",
		"gangway_gpu_xid_errors_total", "gangway_gpu_faults_total", "gangway_gpu_reclaims_total", "gangway_node_heartbeat_age_seconds",
		"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "DCGM_") {
			continue // dcgm-exporter's names and labels, kept as DCGM dashboards expect them
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
