package metrics

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GPU holds a node agent's per-GPU collectors: readings, health, faults
// and reclaims, and the node's heartbeat age. Per-GPU series carry node,
// gpu (the slot index), uuid, model and team (of the job running on the
// GPU; "" when it is free). Every method is safe on a nil *GPU, which
// records nothing.
type GPU struct {
	util, smActive, memUsed, temp, power, healthy, idle *prometheus.GaugeVec
	xids, faults, reclaims                              *prometheus.CounterVec
	heartbeatAge                                        *prometheus.GaugeVec
}

var gpuLabels = []string{"node", "gpu", "uuid", "model", "team"}

// Reclaim kinds, for Reclaimed.
const (
	ReclaimZombie = "zombie" // a process on a GPU that belonged to no task
	ReclaimOrphan = "orphan" // a task whose job's workflow was gone
	ReclaimIdle   = "idle"   // a job's idle policy released its GPUs
)

// NewGPU creates the GPU collectors and registers them on reg.
func NewGPU(reg prometheus.Registerer) *GPU {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, gpuLabels)
	}
	m := &GPU{
		util:     gauge("gpu_utilization_ratio", "Share of the last sample period a kernel ran on the GPU (0-1). Absent where NVML does not report it (MIG devices, synthetic GPUs)."),
		smActive: gauge("gpu_sm_active_ratio", "Share of the GPU's SMs busy since the last sample (0-1, NVML GPM; Hopper and later)."),
		memUsed:  gauge("gpu_memory_used_bytes", "GPU memory in use."),
		temp:     gauge("gpu_temperature_celsius", "GPU temperature."),
		power:    gauge("gpu_power_watts", "GPU power draw."),
		healthy:  gauge("gpu_healthy", "1 while the GPU is in service, 0 once a hardware fault fenced it."),
		idle:     gauge("gpu_idle_seconds", "How long the job on the GPU has kept it below its idle threshold (0 when busy or free)."),
		xids: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_xid_errors_total",
			Help: "Xid errors the GPU reported, by Xid code."}, append(gpuLabels[:5:5], "xid")),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_faults_total",
			Help: "Faults the GPU reported, by kind (xid, ecc-dbe, ecc-uncorrectable, row-remap-failure, row-remap-pending, gpu-lost) and blame (gpu, app, none)."},
			append(gpuLabels[:5:5], "kind", "blame")),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_reclaims_total",
			Help: "GPUs taken back by the agent, by kind: zombie (a process no task owned, killed), orphan (a task whose workflow was gone, stopped), idle (released by the job's idle policy)."},
			[]string{"node", "kind"}),
		heartbeatAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "node_heartbeat_age_seconds",
			Help: "Time since the node last heartbeated to the Redis view successfully."}, []string{"node"}),
	}
	reg.MustRegister(m.util, m.smActive, m.memUsed, m.temp, m.power, m.healthy, m.idle, m.xids, m.faults, m.reclaims, m.heartbeatAge)
	return m
}

// GPUReading is one GPU's sample as the agent hands it over. NaN readings
// are not exported.
type GPUReading struct {
	Index       int
	UUID, Model string
	Team        string // of the job on the GPU; "" when free
	Utilization float64
	SMActivity  float64
	MemUsedB    float64
	TempC       float64
	PowerW      float64
	Healthy     bool
	IdleFor     time.Duration
}

// Readings replaces node's per-GPU gauges with readings (a GPU whose job
// changed loses its old team's series).
func (m *GPU) Readings(node string, readings []GPUReading) {
	if m == nil {
		return
	}
	all := []*prometheus.GaugeVec{m.util, m.smActive, m.memUsed, m.temp, m.power, m.healthy, m.idle}
	for _, g := range all {
		g.DeletePartialMatch(prometheus.Labels{"node": node})
	}
	for _, r := range readings {
		l := prometheus.Labels{"node": node, "gpu": strconv.Itoa(r.Index), "uuid": r.UUID, "model": r.Model, "team": r.Team}
		set := func(g *prometheus.GaugeVec, v float64) {
			if !math.IsNaN(v) {
				g.With(l).Set(v)
			}
		}
		set(m.util, r.Utilization)
		set(m.smActive, r.SMActivity)
		set(m.memUsed, r.MemUsedB)
		set(m.temp, r.TempC)
		set(m.power, r.PowerW)
		set(m.healthy, map[bool]float64{true: 1, false: 0}[r.Healthy])
		set(m.idle, r.IdleFor.Seconds())
	}
}

// Fault counts a fault on one GPU; an Xid also counts by its code.
func (m *GPU) Fault(node string, gpu int, uuid, model, team, kind, blame string, xid int) {
	if m == nil {
		return
	}
	g := strconv.Itoa(gpu)
	m.faults.WithLabelValues(node, g, uuid, model, team, kind, blame).Inc()
	if xid > 0 {
		m.xids.WithLabelValues(node, g, uuid, model, team, strconv.Itoa(xid)).Inc()
	}
}

// Reclaimed counts n GPUs (or processes, for zombies) taken back on node.
func (m *GPU) Reclaimed(node, kind string, n int) {
	if m == nil {
		return
	}
	m.reclaims.WithLabelValues(node, kind).Add(float64(n))
}

// HeartbeatAge records how long ago node last heartbeated.
func (m *GPU) HeartbeatAge(node string, age time.Duration) {
	if m == nil {
		return
	}
	m.heartbeatAge.WithLabelValues(node).Set(age.Seconds())
}
