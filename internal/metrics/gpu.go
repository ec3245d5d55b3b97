package metrics

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GPU holds a node agent's per-GPU collectors: readings, health, faults
// and reclaims, and the node's heartbeat age. Gangway's own per-GPU series
// carry node, pool, gpu (the slot index), uuid, model and team (of the job
// running on the GPU; "" when it is free).
//
// Beside them the readings are exported under the names and labels of
// NVIDIA's dcgm-exporter (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, …
// with gpu, UUID, device, modelName and Hostname), in its units (percent,
// MiB), so dashboards and alerts written for DCGM work on a Gangway
// fleet without dcgm-exporter. Hostname is the node ID, which is the
// host's name unless configured otherwise.
//
// Every method is safe on a nil *GPU, which records nothing.
type GPU struct {
	util, smActive, memUsed, temp, power, healthy, idle *prometheus.GaugeVec
	xids, faults, reclaims                              *prometheus.CounterVec
	heartbeatAge                                        *prometheus.GaugeVec

	dcgmUtil, dcgmFB, dcgmTemp, dcgmPower, dcgmSM, dcgmXid *prometheus.GaugeVec
}

var gpuLabels = []string{"node", "pool", "gpu", "uuid", "model", "team"}

// dcgmLabels are the labels dcgm-exporter puts on every per-GPU series
// (its Kubernetes pod labels aside).
var dcgmLabels = []string{"gpu", "UUID", "device", "modelName", "Hostname"}

// Reclaim kinds, for Reclaimed.
const (
	ReclaimZombie = "zombie" // a process on a GPU that belonged to no task
	ReclaimOrphan = "orphan" // a task whose job's workflow was gone
	ReclaimIdle   = "idle"   // a job's idle policy released its GPUs
)

// ReclaimKinds are the values of gangway_gpu_reclaims_total's kind label.
var ReclaimKinds = []string{ReclaimZombie, ReclaimOrphan, ReclaimIdle}

// NewGPU creates the GPU collectors and registers them on reg.
func NewGPU(reg prometheus.Registerer) *GPU {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, gpuLabels)
	}
	dcgm := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, dcgmLabels)
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
			Help: "Xid errors the GPU reported, by Xid code."}, append(gpuLabels[:6:6], "xid")),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_faults_total",
			Help: "Faults the GPU reported, by kind (xid, ecc-dbe, ecc-uncorrectable, row-remap-failure, row-remap-pending, gpu-lost) and blame (gpu, app, none)."},
			append(gpuLabels[:6:6], "kind", "blame")),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_reclaims_total",
			Help: "GPUs taken back by the agent, by kind: zombie (a process no task owned, killed), orphan (a task whose workflow was gone, stopped), idle (released by the job's idle policy)."},
			[]string{"node", "kind"}),
		heartbeatAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "node_heartbeat_age_seconds",
			Help: "Time since the node last heartbeated to the Redis view successfully."}, []string{"node"}),

		dcgmUtil:  dcgm("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
		dcgmFB:    dcgm("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
		dcgmTemp:  dcgm("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
		dcgmPower: dcgm("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
		dcgmSM:    dcgm("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned (0-1)."),
		dcgmXid:   dcgm("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered."),
	}
	reg.MustRegister(m.util, m.smActive, m.memUsed, m.temp, m.power, m.healthy, m.idle, m.xids, m.faults, m.reclaims, m.heartbeatAge,
		m.dcgmUtil, m.dcgmFB, m.dcgmTemp, m.dcgmPower, m.dcgmSM, m.dcgmXid)
	return m
}

// NodeLabels name the node an agent's series are about.
type NodeLabels struct {
	Node string // node ID; also dcgm-exporter's Hostname
	Pool string
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

// Node creates the series of n that exist before anything happens on it:
// its reclaim counters, by kind.
func (m *GPU) Node(n NodeLabels) {
	if m == nil {
		return
	}
	for _, k := range ReclaimKinds {
		m.reclaims.WithLabelValues(n.Node, k)
	}
}

func (m *GPU) labels(n NodeLabels, gpu int, uuid, model, team string) prometheus.Labels {
	return prometheus.Labels{"node": n.Node, "pool": n.Pool, "gpu": strconv.Itoa(gpu), "uuid": uuid, "model": model, "team": team}
}

func dcgmLabelsOf(n NodeLabels, gpu int, uuid, model string) prometheus.Labels {
	g := strconv.Itoa(gpu)
	return prometheus.Labels{"gpu": g, "UUID": uuid, "device": "nvidia" + g, "modelName": model, "Hostname": n.Node}
}

// Readings replaces n's per-GPU gauges with readings (a GPU whose job
// changed loses its old team's series). DCGM_FI_DEV_XID_ERRORS keeps the
// last Xid of each GPU, 0 until it reports one.
func (m *GPU) Readings(n NodeLabels, readings []GPUReading) {
	if m == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{m.util, m.smActive, m.memUsed, m.temp, m.power, m.healthy, m.idle} {
		g.DeletePartialMatch(prometheus.Labels{"node": n.Node})
	}
	for _, g := range []*prometheus.GaugeVec{m.dcgmUtil, m.dcgmFB, m.dcgmTemp, m.dcgmPower, m.dcgmSM} {
		g.DeletePartialMatch(prometheus.Labels{"Hostname": n.Node})
	}
	for _, r := range readings {
		l := m.labels(n, r.Index, r.UUID, r.Model, r.Team)
		d := dcgmLabelsOf(n, r.Index, r.UUID, r.Model)
		set := func(g *prometheus.GaugeVec, l prometheus.Labels, v float64) {
			if !math.IsNaN(v) {
				g.With(l).Set(v)
			}
		}
		set(m.util, l, r.Utilization)
		set(m.smActive, l, r.SMActivity)
		set(m.memUsed, l, r.MemUsedB)
		set(m.temp, l, r.TempC)
		set(m.power, l, r.PowerW)
		set(m.healthy, l, map[bool]float64{true: 1, false: 0}[r.Healthy])
		set(m.idle, l, r.IdleFor.Seconds())
		set(m.dcgmUtil, d, r.Utilization*100)
		set(m.dcgmFB, d, r.MemUsedB/(1<<20))
		set(m.dcgmTemp, d, r.TempC)
		set(m.dcgmPower, d, r.PowerW)
		set(m.dcgmSM, d, r.SMActivity)
		m.dcgmXid.With(d) // 0 until an Xid
	}
}

// Fault counts a fault on one GPU; an Xid also counts by its code and
// becomes the GPU's DCGM_FI_DEV_XID_ERRORS.
func (m *GPU) Fault(n NodeLabels, gpu int, uuid, model, team, kind, blame string, xid int) {
	if m == nil {
		return
	}
	l := m.labels(n, gpu, uuid, model, team)
	fl := prometheus.Labels{"kind": kind, "blame": blame}
	for k, v := range l {
		fl[k] = v
	}
	m.faults.With(fl).Inc()
	if xid > 0 {
		l["xid"] = strconv.Itoa(xid)
		m.xids.With(l).Inc()
		m.dcgmXid.With(dcgmLabelsOf(n, gpu, uuid, model)).Set(float64(xid))
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
