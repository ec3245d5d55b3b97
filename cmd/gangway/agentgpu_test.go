package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/gpuinfo/gpuinfotest"
)

// inventoryJSON is what --inventory-only prints.
type inventoryJSON struct {
	Node struct {
		ID            string `json:"id"`
		DriverVersion string `json:"driverVersion"`
		CUDAVersion   string `json:"cudaVersion"`
		GPUs          []struct {
			Model        string `json:"model"`
			NVLinkDomain string `json:"nvlinkDomain"`
			NUMA         int    `json:"numa"`
		} `json:"gpus"`
	} `json:"node"`
	GPUs     []gpuinfo.GPUInfo `json:"gpus"`
	Topology gpuinfo.Topology  `json:"topology"`
}

func TestAgentInventoryWithoutDriver(t *testing.T) {
	noDriver := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := config.AgentConfig{NodeID: "n1"}.OpenGPUs(noDriver, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("no error without a driver")
	}
	for _, part := range []string{"no NVIDIA driver found (libnvidia-ml.so)", "--fake-gpus 8xH100", "synthetic inventory"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}

	// The command on this machine: the real NVML finds no driver here.
	if _, err := gpuinfo.Open(nvml.New(), gpuinfo.Options{}); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	out, err := runGangway(t, "agent", "--inventory-only", "--node-id", "n1")
	if err == nil || !strings.Contains(err.Error(), "no NVIDIA driver found") || !strings.Contains(err.Error(), "--fake-gpus") {
		t.Errorf("gangway agent --inventory-only without a driver: %v\n%s", err, out)
	}
}

func TestAgentInventoryOnlyFake(t *testing.T) {
	out, err := runGangway(t, "agent", "--inventory-only", "--node-id", "n1", "--fake-gpus", "8xH100")
	if err != nil {
		t.Fatalf("gangway agent --inventory-only --fake-gpus 8xH100: %v\n%s", err, out)
	}
	var inv inventoryJSON
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if inv.Node.ID != "n1" || len(inv.Node.GPUs) != 8 || inv.Node.GPUs[7].NVLinkDomain != "n1/nvswitch" || len(inv.Topology.Matrix) != 8 {
		t.Errorf("inventory %+v", inv)
	}
}

func TestAgentInventoryNVML(t *testing.T) {
	g, err := config.AgentConfig{NodeID: "dgx-1", Pool: "onprem", Addr: "dgx-1.lab"}.OpenGPUs(gpuinfotest.NewDGXH100(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := printInventory(&buf, g); err != nil {
		t.Fatal(err)
	}
	var inv inventoryJSON
	if err := json.Unmarshal(buf.Bytes(), &inv); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, buf.String())
	}
	if inv.Node.DriverVersion != "550.54.15" || inv.Node.CUDAVersion != "12.4" || len(inv.Node.GPUs) != 8 {
		t.Errorf("node %+v", inv.Node)
	}
	if gpu := inv.Node.GPUs[5]; gpu.Model != "H100" || gpu.NVLinkDomain != "dgx-1/nvswitch" || gpu.NUMA != 1 {
		t.Errorf("GPU 5 %+v", gpu)
	}
	if inv.Topology.Matrix[0][7] != "NV18" || len(inv.GPUs) != 8 || inv.GPUs[0].PCIBusID == "" {
		t.Errorf("topology %+v, GPUs %+v", inv.Topology, inv.GPUs)
	}
	if g.Node.CPUMilli <= 0 || g.Node.MemMiB <= 0 {
		t.Errorf("host resources %d milli-CPU, %d MiB", g.Node.CPUMilli, g.Node.MemMiB)
	}
}
