package gpuinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gangwayhq/gangway"
)

// Inventory is what a node has: the physical GPUs as NVML reports them, the
// slots the node registers for scheduling, and the topology between them.
// `gangway agent --inventory-only` prints it as JSON.
type Inventory struct {
	DriverVersion string    `json:"driverVersion,omitempty"`
	CUDAVersion   string    `json:"cudaVersion,omitempty"`
	GPUs          []GPUInfo `json:"gpus"`
	// Slots are the schedulable GPUs (gangway.Node.GPUs): one per whole
	// GPU, one per MIG device.
	Slots    []gangway.GPU `json:"slots"`
	Topology Topology      `json:"topology"`
	// Warnings are things about the node the scheduler cannot express
	// (GPUs of different models on one node).
	Warnings []string `json:"warnings,omitempty"`
}

// GPUInfo is one physical GPU.
type GPUInfo struct {
	Index int    `json:"index"` // NVML index (PCI bus order)
	UUID  string `json:"uuid"`
	Name  string `json:"name"`  // as NVML names it, "NVIDIA H100 80GB HBM3"
	Model string `json:"model"` // what job specs name, "H100"
	// MemMiB is the GPU's total memory.
	MemMiB   int    `json:"memMiB"`
	PCIBusID string `json:"pciBusId"`
	// NUMA is the GPU's NUMA node (-1: unknown); CPUAffinity the CPUs
	// close to it, as a list ("0-55,112-167").
	NUMA        int    `json:"numa"`
	CPUAffinity string `json:"cpuAffinity,omitempty"`
	// NVLinks are its active links; NVLinkDomain the domain they put it
	// in ("" when it has none).
	NVLinks      []NVLink `json:"nvlinks,omitempty"`
	NVLinkDomain string   `json:"nvlinkDomain,omitempty"`
	// MIG is whether MIG mode is on; MIGDevices its instances.
	MIG        bool        `json:"mig"`
	MIGDevices []MIGDevice `json:"migDevices,omitempty"`
	// Slots are the indices of the schedulable GPUs this GPU provides.
	Slots []int `json:"slots"`
}

// NVLink is one active NVLink of a GPU.
type NVLink struct {
	Link int `json:"link"`
	// Remote is the PCI bus ID at the other end; RemoteType "gpu",
	// "switch" (an NVSwitch) or "unknown".
	Remote     string `json:"remote"`
	RemoteType string `json:"remoteType"`
}

// MIGDevice is one MIG device (a GPU instance and compute instance pair).
type MIGDevice struct {
	UUID            string `json:"uuid"`
	Name            string `json:"name"`
	Profile         string `json:"profile"` // "1g.10gb"
	MemMiB          int    `json:"memMiB"`
	GPUInstance     int    `json:"gpuInstance"`
	ComputeInstance int    `json:"computeInstance"`
	Slot            int    `json:"slot"`
}

// Topology is how the GPUs reach each other.
type Topology struct {
	// NVLinkDomains lists each domain and its GPUs (NVML indices).
	NVLinkDomains []Domain `json:"nvlinkDomains"`
	// Matrix[i][j] is how GPU i reaches GPU j, in nvidia-smi topo -m's
	// words: X (itself), NV<links>, PIX (one PCIe switch), PXB (several
	// PCIe switches), PHB (a PCIe host bridge), NODE (within a NUMA node),
	// SYS (across NUMA nodes).
	Matrix [][]string `json:"matrix"`
}

// Domain is one NVLink domain.
type Domain struct {
	Name string `json:"name"`
	GPUs []int  `json:"gpus"`
	// Switched: the GPUs reach each other through NVSwitches; Fabric: the
	// domain spans nodes (a rack-scale NVLink fabric).
	Switched bool `json:"switched,omitempty"`
	Fabric   bool `json:"fabric,omitempty"`
}

// Node fills a node record from the inventory: the slots as its GPUs, and
// the driver and CUDA versions.
func (inv Inventory) Node(id, pool, addr string, cpuMilli, memMiB int64) gangway.Node {
	return gangway.Node{ID: id, Addr: addr, Pool: pool, DriverVersion: inv.DriverVersion, CUDAVersion: inv.CUDAVersion,
		GPUs: slices.Clone(inv.Slots), CPUMilli: cpuMilli, MemMiB: memMiB}
}

// Inventory reads the node's GPUs. nodeID names the node's NVLink domains
// (they must be unique in the fleet). It must be called once before
// WatchFaults and Sample.
func (n *NVML) Inventory(nodeID string) (Inventory, error) {
	var inv Inventory
	driver, ret := n.lib.SystemGetDriverVersion()
	if err := ok(ret, "driver version"); err != nil {
		return inv, err
	}
	inv.DriverVersion = driver
	if v, ret := n.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		inv.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	count, ret := n.lib.DeviceGetCount()
	if err := ok(ret, "device count"); err != nil {
		return inv, err
	}
	n.gpus = nil
	for i := range count {
		h, ret := n.lib.DeviceGetHandleByIndex(i)
		if err := ok(ret, "GPU %d: handle", i); err != nil {
			return inv, err
		}
		g, err := readGPU(i, h)
		if err != nil {
			return inv, err
		}
		n.gpus = append(n.gpus, g)
	}
	inv.Topology = n.topology(nodeID)
	models := map[string]bool{}
	for _, g := range n.gpus {
		domain := g.info.NVLinkDomain
		if g.info.MIG {
			domain = "" // MIG devices do not do peer-to-peer over NVLink
		}
		numa := max(g.info.NUMA, 0)
		if len(g.mig) == 0 && !g.info.MIG {
			g.info.Slots = []int{len(inv.Slots)}
			inv.Slots = append(inv.Slots, gangway.GPU{Index: len(inv.Slots), UUID: g.info.UUID, Model: g.info.Model,
				MemMiB: g.info.MemMiB, Healthy: true, NVLinkDomain: domain, NUMA: numa})
			models[g.info.Model] = true
			continue
		}
		for k := range g.mig {
			md := &g.info.MIGDevices[k]
			md.Slot, g.mig[k].slot = len(inv.Slots), len(inv.Slots)
			g.info.Slots = append(g.info.Slots, md.Slot)
			inv.Slots = append(inv.Slots, gangway.GPU{Index: md.Slot, UUID: md.UUID, Model: g.info.Model,
				MemMiB: md.MemMiB, Healthy: true, NUMA: numa,
				MIGProfile: md.Profile, ParentIndex: g.info.Index, ParentUUID: g.info.UUID})
			models[g.info.Model] = true
		}
		if len(g.mig) == 0 {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("GPU %d (%s) is in MIG mode with no MIG devices: it offers nothing to schedule", g.info.Index, g.info.UUID))
		}
	}
	if len(models) > 1 {
		names := slices.Sorted(func(yield func(string) bool) {
			for m := range models {
				if !yield(m) {
					return
				}
			}
		})
		inv.Warnings = append(inv.Warnings, fmt.Sprintf(
			"GPUs of %d models on one node (%s): the scheduler treats a node as one model, %s, so jobs asking for the others never land here",
			len(names), strings.Join(names, ", "), inv.Slots[0].Model))
	}
	for _, g := range n.gpus {
		inv.GPUs = append(inv.GPUs, g.info)
	}
	return inv, nil
}

// readGPU reads one physical GPU's identity, memory, locality and MIG
// devices.
func readGPU(i int, h nvml.Device) (*physGPU, error) {
	g := &physGPU{h: h, info: GPUInfo{Index: i, NUMA: -1}}
	var ret nvml.Return
	if g.info.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
		return nil, ok(ret, "GPU %d: UUID", i)
	}
	if g.info.Name, ret = h.GetName(); ret != nvml.SUCCESS {
		return nil, ok(ret, "GPU %d: name", i)
	}
	g.info.Model = ShortModel(g.info.Name)
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return nil, ok(ret, "GPU %d: memory", i)
	}
	g.info.MemMiB = int(mem.Total >> 20)
	if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
		g.info.PCIBusID = busID(pci)
	}
	if numa, ret := h.GetNumaNodeId(); ret == nvml.SUCCESS && numa >= 0 {
		g.info.NUMA = numa
	}
	if set, ret := h.GetCpuAffinity(cpuSetWords()); ret == nvml.SUCCESS {
		g.info.CPUAffinity = cpuList(set)
	}
	if cur, _, ret := h.GetMigMode(); ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE {
		g.info.MIG = true
		if err := g.readMIG(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *physGPU) readMIG() error {
	i := g.info.Index
	maxDevs, ret := g.h.GetMaxMigDeviceCount()
	if err := ok(ret, "GPU %d: MIG device count", i); err != nil {
		return err
	}
	for k := range maxDevs {
		mh, ret := g.h.GetMigDeviceHandleByIndex(k)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // an empty MIG slot
		}
		if err := ok(ret, "GPU %d: MIG device %d", i, k); err != nil {
			return err
		}
		md := MIGDevice{}
		if md.UUID, ret = mh.GetUUID(); ret != nvml.SUCCESS {
			return ok(ret, "GPU %d: MIG device %d: UUID", i, k)
		}
		md.Name, _ = mh.GetName()
		if mem, ret := mh.GetMemoryInfo(); ret == nvml.SUCCESS {
			md.MemMiB = int(mem.Total >> 20)
		}
		md.GPUInstance, _ = mh.GetGpuInstanceId()
		md.ComputeInstance, _ = mh.GetComputeInstanceId()
		md.Profile = migProfile(md.Name, md.MemMiB)
		g.info.MIGDevices = append(g.info.MIGDevices, md)
		g.mig = append(g.mig, migHandle{h: mh, gi: md.GPUInstance, ci: md.ComputeInstance})
	}
	return nil
}

// ShortModel turns NVML's product name into the model job specs name:
// "NVIDIA H100 80GB HBM3" → "H100", "NVIDIA A100-SXM4-40GB" → "A100",
// "NVIDIA GeForce RTX 4090" → "RTX-4090", "NVIDIA L40S" → "L40S".
func ShortModel(name string) string {
	f := strings.Fields(name)
	for len(f) > 0 {
		switch strings.ToLower(f[0]) {
		case "nvidia", "tesla", "geforce", "mock":
			f = f[1:]
			continue
		}
		break
	}
	if len(f) == 0 {
		return name
	}
	switch strings.ToUpper(f[0]) {
	case "RTX", "QUADRO", "TITAN", "GRID":
		if len(f) > 1 {
			return f[0] + "-" + f[1]
		}
		return f[0]
	}
	// Form factor and memory ride along after a dash: A100-SXM4-40GB.
	model, _, _ := strings.Cut(f[0], "-")
	return model
}

// migProfile is the profile part of a MIG device's name ("NVIDIA H100
// 80GB HBM3 MIG 1g.10gb" → "1g.10gb"), or one made from its memory.
func migProfile(name string, memMiB int) string {
	if _, p, found := strings.Cut(name, " MIG "); found && p != "" {
		return strings.ReplaceAll(strings.TrimSpace(p), " ", "-")
	}
	return fmt.Sprintf("%dgb", (memMiB+512)/1024)
}

// busID formats a PCI address the way NVML does (domain:bus:device.0),
// from the numeric fields, so GPU and NVLink remote addresses compare
// equal however NVML padded the string.
func busID(p nvml.PciInfo) string {
	if p.Domain == 0 && p.Bus == 0 && p.Device == 0 {
		return cString(p.BusId[:])
	}
	return fmt.Sprintf("%08x:%02x:%02x.0", p.Domain, p.Bus, p.Device)
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return strings.ToLower(string(out))
}

// cpuSetWords is how many 64-bit words of CPU mask to ask NVML for.
func cpuSetWords() int { return max((runtime.NumCPU()+63)/64, 16) }

// cpuList formats a CPU bit mask as a list of ranges ("0-3,8").
func cpuList(words []uint) string {
	var b strings.Builder
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if end == start {
			b.WriteString(strconv.Itoa(start))
		} else {
			fmt.Fprintf(&b, "%d-%d", start, end)
		}
		start = -1
	}
	n := len(words) * 64
	for cpu := range n {
		set := words[cpu/64]>>(cpu%64)&1 == 1
		switch {
		case set && start < 0:
			start = cpu
		case !set:
			flush(cpu - 1)
		}
	}
	flush(n - 1)
	return b.String()
}

// HostResources is the machine's CPU (in milli-CPU) and memory (MiB), for
// the node record.
func HostResources() (cpuMilli, memMiB int64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, fmt.Errorf("host memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("host memory: %q: %w", sc.Text(), err)
			}
			return int64(runtime.NumCPU()) * 1000, kib / 1024, nil
		}
	}
	return 0, 0, fmt.Errorf("host memory: no MemTotal in /proc/meminfo")
}
