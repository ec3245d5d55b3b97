package agent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

func TestParseFleet(t *testing.T) {
	const hint = " (want COUNTxGPUS:MODEL, e.g. 4x8:H100)"
	cases := map[string]struct {
		in      string
		want    []NodeShape
		wantErr string
	}{
		"one group":                 {in: "4x8:H100", want: []NodeShape{{Count: 4, GPUs: 8, Model: "H100"}}},
		"smallest":                  {in: "1x1:L4", want: []NodeShape{{Count: 1, GPUs: 1, Model: "L4"}}},
		"largest":                   {in: "10000x8:B200", want: []NodeShape{{Count: 10000, GPUs: 8, Model: "B200"}}},
		"groups keep their order":   {in: "2x4:A100,4x8:H100", want: []NodeShape{{2, 4, "A100"}, {4, 8, "H100"}}},
		"spaces around groups":      {in: " 4x8:H100 , 2x4:A100 ", want: []NodeShape{{4, 8, "H100"}, {2, 4, "A100"}}},
		"same shape twice is fine":  {in: "1x8:H100,1x8:H100", want: []NodeShape{{1, 8, "H100"}, {1, 8, "H100"}}},
		"empty":                     {in: "", wantErr: `node group "": missing GPU model` + hint},
		"no model":                  {in: "4x8", wantErr: `node group "4x8": missing GPU model` + hint},
		"empty model":               {in: "4x8:", wantErr: `node group "4x8:": missing GPU model` + hint},
		"no x":                      {in: "48:H100", wantErr: `node group "48:H100": missing 'x'` + hint},
		"count not a number":        {in: "ax8:H100", wantErr: `node group "ax8:H100": node count must be 1..10000, got "a"` + hint},
		"count zero":                {in: "0x8:H100", wantErr: `node group "0x8:H100": node count must be 1..10000, got "0"` + hint},
		"count too large":           {in: "10001x8:H100", wantErr: `node group "10001x8:H100": node count must be 1..10000, got "10001"` + hint},
		"count negative":            {in: "-1x8:H100", wantErr: `node group "-1x8:H100": node count must be 1..10000, got "-1"` + hint},
		"GPUs zero":                 {in: "4x0:H100", wantErr: `node group "4x0:H100": GPUs per node must be 1..8, got "0"` + hint},
		"GPUs too many":             {in: "4x9:H100", wantErr: `node group "4x9:H100": GPUs per node must be 1..8, got "9"` + hint},
		"GPUs missing":              {in: "4x:H100", wantErr: `node group "4x:H100": GPUs per node must be 1..8, got ""` + hint},
		"bad group after good one":  {in: "4x8:H100,2x4", wantErr: `node group "2x4": missing GPU model` + hint},
		"trailing comma":            {in: "4x8:H100,", wantErr: `node group "": missing GPU model` + hint},
		"uppercase X is not an x":   {in: "4X8:H100", wantErr: `node group "4X8:H100": missing 'x'` + hint},
		"spaces inside a group bad": {in: "4 x 8:H100", wantErr: `node group "4 x 8:H100": node count must be 1..10000, got "4 "` + hint},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseFleet(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseFleet(%q) = %+v, want error %q", tc.in, got, tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Fatalf("ParseFleet(%q) error:\n got %q\nwant %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseFleet(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseFleet(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestFakeNode(t *testing.T) {
	got := FakeNode("gpu-7", "onprem", "10.0.0.7", 2, "H100")
	want := gangway.Node{
		ID: "gpu-7", Addr: "10.0.0.7", Pool: "onprem",
		CPUMilli: 2 * 16000, MemMiB: 2 * 128 * 1024,
		GPUs: []gangway.GPU{
			{Index: 0, UUID: "GPU-fake-gpu-7-0", Model: "H100", MemMiB: 80 * 1024, Healthy: true, NVLinkDomain: "gpu-7/nvswitch", NUMA: 0},
			{Index: 1, UUID: "GPU-fake-gpu-7-1", Model: "H100", MemMiB: 80 * 1024, Healthy: true, NVLinkDomain: "gpu-7/nvswitch", NUMA: 1},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FakeNode mismatch (-want +got):\n%s", diff)
	}
	if got.Model() != "H100" {
		t.Errorf("Model() = %q, want H100", got.Model())
	}
}

func TestFakeFleet(t *testing.T) {
	shapes, err := ParseFleet("2x8:H100,1x4:A100")
	if err != nil {
		t.Fatal(err)
	}
	nodes := FakeFleet("dev", "local", shapes)

	type summary struct {
		ID, Pool, Addr, Model string
		GPUs                  int
	}
	var got []summary
	uuids := map[string]bool{}
	for _, n := range nodes {
		got = append(got, summary{n.ID, n.Pool, n.Addr, n.Model(), len(n.GPUs)})
		for _, g := range n.GPUs {
			if uuids[g.UUID] {
				t.Errorf("GPU UUID %s appears twice in the fleet", g.UUID)
			}
			uuids[g.UUID] = true
		}
		if diff := cmp.Diff(FakeNode(n.ID, "local", "127.0.0.1", len(n.GPUs), n.Model()), n); diff != "" {
			t.Errorf("node %s is not FakeNode's (-want +got):\n%s", n.ID, diff)
		}
	}
	want := []summary{
		{"dev-0", "local", "127.0.0.1", "H100", 8},
		{"dev-1", "local", "127.0.0.1", "H100", 8},
		{"dev-2", "local", "127.0.0.1", "A100", 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FakeFleet mismatch (-want +got):\n%s", diff)
	}
	if n := FakeFleet("dev", "local", nil); len(n) != 0 {
		t.Errorf("FakeFleet of no shapes = %d nodes, want 0", len(n))
	}
}

// TestVisibleDevices: whole GPUs go to CUDA by index, MIG devices by UUID.
func TestVisibleDevices(t *testing.T) {
	n := FakeNode("n", "onprem", "127.0.0.1", 3, "H100")
	n.GPUs[2].UUID = "MIG-5d3c1a9e-0000-4000-8000-000000000002"
	a := New(Config{Node: n}, nil)
	got := strings.Join(a.visibleDevices([]int{0, 2}), ",")
	if want := "0,MIG-5d3c1a9e-0000-4000-8000-000000000002"; got != want {
		t.Errorf("CUDA_VISIBLE_DEVICES = %s, want %s", got, want)
	}
}
