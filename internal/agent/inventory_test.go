package agent

import (
	"slices"
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
		"one group":                {in: "4x8:H100", want: []NodeShape{{Count: 4, GPUs: 8, Model: "H100"}}},
		"smallest":                 {in: "1x1:L4", want: []NodeShape{{Count: 1, GPUs: 1, Model: "L4"}}},
		"largest":                  {in: "10000x8:B200", want: []NodeShape{{Count: 10000, GPUs: 8, Model: "B200"}}},
		"groups keep their order":  {in: "2x4:A100,4x8:H100", want: []NodeShape{{Count: 2, GPUs: 4, Model: "A100"}, {Count: 4, GPUs: 8, Model: "H100"}}},
		"spaces around groups":     {in: " 4x8:H100 , 2x4:A100 ", want: []NodeShape{{Count: 4, GPUs: 8, Model: "H100"}, {Count: 2, GPUs: 4, Model: "A100"}}},
		"same shape twice is fine": {in: "1x8:H100,1x8:H100", want: []NodeShape{{Count: 1, GPUs: 8, Model: "H100"}, {Count: 1, GPUs: 8, Model: "H100"}}},
		"every GPU in MIG mode": {in: "1x2:H100:mig=3g.40gb/2g.20gb/1g.10gb*2",
			want: []NodeShape{{Count: 1, GPUs: 2, Model: "H100", MIGGPUs: 2, MIG: []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}}}},
		"the first GPU in MIG mode": {in: "2x8:H100:mig1=1g.10gb*7,1x4:A100",
			want: []NodeShape{{Count: 2, GPUs: 8, Model: "H100", MIGGPUs: 1, MIG: slices.Repeat([]string{"1g.10gb"}, 7)}, {Count: 1, GPUs: 4, Model: "A100"}}},
		"an A30 has four slices": {in: "1x1:A30:mig=2g.12gb*2", want: []NodeShape{{Count: 1, GPUs: 1, Model: "A30", MIGGPUs: 1, MIG: []string{"2g.12gb", "2g.12gb"}}}},
		"MIG layout too large": {in: "1x1:H100:mig=4g.40gb*2",
			wantErr: `node group "1x1:H100:mig=4g.40gb*2": "mig=4g.40gb*2": the MIG devices take 8 slices, more than the 7 of a H100` + hint},
		"MIG on more GPUs than there are": {in: "1x2:H100:mig3=1g.10gb",
			wantErr: `node group "1x2:H100:mig3=1g.10gb": "mig3=1g.10gb": the MIG GPUs must be 1..2, got "3"` + hint},
		"not a MIG profile": {in: "1x1:H100:mig=small",
			wantErr: `node group "1x1:H100:mig=small": "mig=small": MIG profile "small": want compute slices and memory such as 1g.10gb or 3g.40gb` + hint},
		"not a MIG layout": {in: "1x1:H100:1g.10gb",
			wantErr: `node group "1x1:H100:1g.10gb": "1g.10gb": want mig=PROFILES or migN=PROFILES, e.g. mig2=1g.10gb*7` + hint},
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

// TestFakeShapeNode: a GPU in MIG mode registers one slot per MIG device,
// with a MIG UUID, its profile and memory and its parent, and no NVLink
// domain; the other GPUs stay whole.
func TestFakeShapeNode(t *testing.T) {
	got := FakeShapeNode("m", "onprem", "10.0.0.9", NodeShape{GPUs: 2, Model: "H100", MIGGPUs: 1, MIG: []string{"3g.40gb", "1g.10gb"}})
	want := []gangway.GPU{
		{Index: 0, UUID: "MIG-fake-m-0-0", Model: "H100", MemMiB: 40 * 1024, Healthy: true, MIGProfile: "3g.40gb", ParentIndex: 0, ParentUUID: "GPU-fake-m-0"},
		{Index: 1, UUID: "MIG-fake-m-0-1", Model: "H100", MemMiB: 10 * 1024, Healthy: true, MIGProfile: "1g.10gb", ParentIndex: 0, ParentUUID: "GPU-fake-m-0"},
		{Index: 2, UUID: "GPU-fake-m-1", Model: "H100", MemMiB: 80 * 1024, Healthy: true, NVLinkDomain: "m/nvswitch", NUMA: 1},
	}
	if diff := cmp.Diff(want, got.GPUs); diff != "" {
		t.Errorf("slots (-want +got):\n%s", diff)
	}
	if got.CPUMilli != 2*16000 || got.MemMiB != 2*128*1024 {
		t.Errorf("CPU %d, memory %d: want those of two GPUs", got.CPUMilli, got.MemMiB)
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

// TestVisibleDevices: whole GPUs go to CUDA by index, MIG devices by UUID;
// on a node with MIG devices whole GPUs by UUID too, since slot indexes
// are not the GPUs' own there.
func TestVisibleDevices(t *testing.T) {
	n := FakeNode("n", "onprem", "127.0.0.1", 3, "H100")
	a := New(Config{Node: n}, nil)
	if got, want := strings.Join(a.visibleDevices([]int{0, 2}), ","), "0,2"; got != want {
		t.Errorf("whole GPUs: CUDA_VISIBLE_DEVICES = %s, want %s", got, want)
	}
	m := FakeShapeNode("m", "onprem", "127.0.0.1", NodeShape{GPUs: 2, Model: "H100", MIGGPUs: 1, MIG: []string{"3g.40gb", "3g.40gb"}})
	a = New(Config{Node: m}, nil)
	if got, want := strings.Join(a.visibleDevices([]int{1}), ","), "MIG-fake-m-0-1"; got != want {
		t.Errorf("a MIG device: CUDA_VISIBLE_DEVICES = %s, want %s", got, want)
	}
	if got, want := strings.Join(a.visibleDevices([]int{2}), ","), "GPU-fake-m-1"; got != want {
		t.Errorf("the whole GPU beside it: CUDA_VISIBLE_DEVICES = %s, want %s", got, want)
	}
}

// TestClaimMIG: a MIG task runs only on MIG devices of its profile, and a
// whole-GPU or share task never on a MIG device.
func TestClaimMIG(t *testing.T) {
	m := FakeShapeNode("m", "onprem", "127.0.0.1", NodeShape{GPUs: 2, Model: "H100", MIGGPUs: 1, MIG: []string{"3g.40gb", "1g.10gb"}})
	a := New(Config{Node: m}, nil)
	tests := map[string]struct {
		gpus    []int
		profile string
		wantErr string
	}{
		"its profile":         {gpus: []int{0}, profile: "3g.40gb"},
		"another profile":     {gpus: []int{1}, profile: "3g.40gb", wantErr: "GPU 1 on node m is not a MIG device of profile 3g.40gb (it is a MIG device of profile 1g.10gb)"},
		"a whole GPU":         {gpus: []int{2}, profile: "3g.40gb", wantErr: "GPU 2 on node m is not a MIG device of profile 3g.40gb (it is a whole GPU)"},
		"whole on a MIG slot": {gpus: []int{0}, wantErr: "GPU 0 on node m is a MIG device (3g.40gb), and the task asks for whole GPUs or a share"},
		"whole on whole":      {gpus: []int{2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := a.claimMIG(tc.gpus, tc.profile)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("claimMIG: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("claimMIG: %v, want %q", err, tc.wantErr)
			}
		})
	}
}
