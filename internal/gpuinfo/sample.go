package gpuinfo

import (
	"context"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Sample is one reading of one slot. Readings the GPU does not offer are
// NaN (utilization of a MIG device, SM activity before Hopper, anything
// from a synthetic GPU nobody set).
type Sample struct {
	Slot int    `json:"slot"`
	UUID string `json:"uuid"`
	// Utilization is the share of the last sample period a kernel ran
	// (0–1); SMActivity the share of SMs busy (0–1, from GPM).
	Utilization  float64 `json:"utilization"`
	SMActivity   float64 `json:"smActivity"`
	MemUsedBytes float64 `json:"memUsedBytes"`
	TempCelsius  float64 `json:"tempCelsius"`
	PowerWatts   float64 `json:"powerWatts"`
	// Processes are the compute processes using the slot.
	Processes []Process `json:"processes,omitempty"`
	// Lost: the GPU stopped answering; the other readings are NaN.
	Lost bool `json:"lost,omitempty"`
}

// Process is a compute process on a GPU.
type Process struct {
	PID       int    `json:"pid"`
	UsedBytes uint64 `json:"usedBytes"`
}

var nan = math.NaN()

// Sample reads every slot once.
func (n *NVML) Sample(ctx context.Context) ([]Sample, error) {
	var out []Sample
	for _, g := range n.gpus {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, n.sampleGPU(g)...)
	}
	return out, nil
}

func (n *NVML) sampleGPU(g *physGPU) []Sample {
	n.mu.Lock()
	lost := g.lost
	n.mu.Unlock()
	base := Sample{Utilization: nan, SMActivity: nan, MemUsedBytes: nan, TempCelsius: nan, PowerWatts: nan}
	if lost {
		return g.each(base, func(s *Sample) { s.Lost = true })
	}
	if t, ret := g.h.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		base.TempCelsius = float64(t)
	}
	if p, ret := g.h.GetPowerUsage(); ret == nvml.SUCCESS {
		base.PowerWatts = float64(p) / 1000
	}
	procs, ret := g.h.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		procs = nil
	}
	if !g.info.MIG {
		if u, ret := g.h.GetUtilizationRates(); ret == nvml.SUCCESS {
			base.Utilization = float64(u.Gpu) / 100
		}
		if m, ret := g.h.GetMemoryInfo(); ret == nvml.SUCCESS {
			base.MemUsedBytes = float64(m.Used)
		}
		base.SMActivity = n.smActivity(g)
		base.Slot, base.UUID = g.info.Slots[0], g.info.UUID
		for _, p := range procs {
			base.Processes = append(base.Processes, Process{PID: int(p.Pid), UsedBytes: p.UsedGpuMemory})
		}
		return []Sample{base}
	}
	out := make([]Sample, 0, len(g.mig))
	for k, m := range g.mig {
		s := base
		s.Slot, s.UUID = m.slot, g.info.MIGDevices[k].UUID
		if mem, ret := m.h.GetMemoryInfo(); ret == nvml.SUCCESS {
			s.MemUsedBytes = float64(mem.Used)
		}
		for _, p := range procs {
			if int(p.GpuInstanceId) == m.gi && int(p.ComputeInstanceId) == m.ci {
				s.Processes = append(s.Processes, Process{PID: int(p.Pid), UsedBytes: p.UsedGpuMemory})
			}
		}
		out = append(out, s)
	}
	return out
}

// each is s once per slot of g, after f.
func (g *physGPU) each(s Sample, f func(*Sample)) []Sample {
	f(&s)
	out := make([]Sample, 0, len(g.info.Slots))
	for k, slot := range g.info.Slots {
		c := s
		c.Slot, c.UUID = slot, g.info.UUID
		if k < len(g.info.MIGDevices) {
			c.UUID = g.info.MIGDevices[k].UUID
		}
		out = append(out, c)
	}
	return out
}

// smActivity is the share of SMs busy since the previous sample, from
// GPU Performance Monitoring (Hopper and later); NaN where GPM is not
// available or on the first sample.
func (n *NVML) smActivity(g *physGPU) float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !g.gpmChecked {
		g.gpmChecked = true
		sup, ret := g.h.GpmQueryDeviceSupport()
		g.gpmOK = ret == nvml.SUCCESS && sup.IsSupportedDevice != 0
	}
	if !g.gpmOK {
		return nan
	}
	cur, ret := n.lib.GpmSampleAlloc()
	if ret != nvml.SUCCESS {
		return nan
	}
	if ret := g.h.GpmSampleGet(cur); ret != nvml.SUCCESS {
		cur.Free()
		return nan
	}
	prev := g.gpmPrev
	g.gpmPrev = cur
	if prev == nil {
		return nan
	}
	defer prev.Free()
	mg := nvml.GpmMetricsGetType{NumMetrics: 1, Sample1: prev, Sample2: cur}
	mg.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
	if ret := n.lib.GpmMetricsGet(&mg); ret != nvml.SUCCESS || mg.Metrics[0].NvmlReturn != uint32(nvml.SUCCESS) {
		return nan
	}
	return mg.Metrics[0].Value / 100
}
