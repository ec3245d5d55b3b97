// Package gpuinfotest provides an NVML mock node for tests outside
// gpuinfo: go-nvml's DGX H100 mock server with what it leaves out filled
// in (NVSwitch links, NUMA, health counters, utilization, processes) and
// an event set tests inject Xid and ECC events into.
package gpuinfotest
