// Package gpuinfo is what the node agent knows about its GPUs: inventory
// and topology, faults, and periodic samples (utilization, memory,
// temperature, power, SM activity, the processes on each GPU).
//
// Two sources provide it. NVML (NVIDIA's management library, through
// github.com/NVIDIA/go-nvml) reads real GPUs; it talks to the library
// through Library, a narrow interface listing only the calls Gangway
// makes, so tests run it on go-nvml's mock servers (the DGX H100 one) and
// on hand-built mocks. Synthetic stands in for GPUs that are not there
// (`gangway agent --fake-gpus 8xH100`, `gangway dev`): it never faults on
// its own, but tests inject faults and utilization into it.
//
// # Slots
//
// The scheduler allocates slots: the gangway.GPU entries a node registers,
// indexed 0..n-1. A whole GPU is one slot. A GPU in MIG mode is one slot per
// MIG device, each with its own MIG UUID, its parent's model, its profile
// ("1g.10gb", gangway.GPU.MIGProfile) and its parent GPU (ParentIndex,
// ParentUUID): a MIG device is a fixed partition with its own memory and
// SMs, so it is scheduled whole, to jobs that ask for its profile, not as
// a milli-GPU share of its parent (placement's shares are fractions any
// size of a free GPU, which MIG's fixed layout cannot give), and a GPU in
// MIG mode offers no whole-GPU slot. Faults and samples name the slots
// they concern; a hardware fault on a MIG-partitioned GPU concerns all of
// its slots.
//
// # Topology
//
// NVLink domains are the connected components of the graph whose edges
// are active NVLinks (GPU to GPU, or GPU to NVSwitch; every NVSwitch of a
// node is one vertex, so an NVSwitch system is one domain). A GPU with no
// active NVLink has no domain ("", alone). Rack-scale domains (GB200 NVL72)
// come from the GPU fabric's cluster UUID and clique ID, which name the
// same domain on every node of the rack. NUMA is NVML's NUMA node ID, or,
// where the driver does not report it, the groups of GPUs whose common
// PCIe ancestor (GetTopologyCommonAncestor) is within one CPU socket.
package gpuinfo
