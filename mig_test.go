package gangway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseMIGProfile: NVIDIA's GPU and compute instance profiles parse;
// anything else is an error.
func TestParseMIGProfile(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    MIGProfile
		wantErr bool
	}{
		"one slice":         {in: "1g.10gb", want: MIGProfile{Slices: 1, GPUSlices: 1, MemGB: 10}},
		"three slices":      {in: "3g.40gb", want: MIGProfile{Slices: 3, GPUSlices: 3, MemGB: 40}},
		"media extensions":  {in: "1g.10gb+me", want: MIGProfile{Slices: 1, GPUSlices: 1, MemGB: 10}},
		"compute instance":  {in: "1c.3g.40gb", want: MIGProfile{Slices: 1, GPUSlices: 3, MemGB: 40}},
		"whole GPU":         {in: "7g.141gb", want: MIGProfile{Slices: 7, GPUSlices: 7, MemGB: 141}},
		"empty":             {in: "", wantErr: true},
		"no memory":         {in: "1g", wantErr: true},
		"upper case":        {in: "1G.10GB", wantErr: true},
		"zero slices":       {in: "0g.10gb", wantErr: true},
		"compute too large": {in: "4c.3g.40gb", wantErr: true},
		"model name":        {in: "H100-MIG-1g.10gb", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMIGProfile(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseMIGProfile(%q): %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestMIGMilli: a MIG device counts its compute slices out of its GPU's,
// rounded down, so one GPU's devices never count for more than the GPU.
func TestMIGMilli(t *testing.T) {
	tests := []struct {
		model, profile string
		want           int
	}{
		{"H100", "1g.10gb", 142},
		{"H100", "1g.20gb", 142},
		{"H100", "2g.20gb", 285},
		{"H100", "3g.40gb", 428},
		{"H100", "4g.40gb", 571},
		{"H100", "7g.80gb", 1000},
		{"H100", "1c.3g.40gb", 142},
		{"A30", "1g.6gb", 250},
		{"A30", "2g.12gb", 500},
		{"A30", "4g.24gb", 1000},
		{"", "3g.40gb", 428},
		{"H100", "nonsense", 1000},
	}
	for _, tc := range tests {
		if got := MIGMilli(tc.model, tc.profile); got != tc.want {
			t.Errorf("MIGMilli(%q, %q) = %d, want %d", tc.model, tc.profile, got, tc.want)
		}
	}
	if seven := 7 * MIGMilli("H100", "1g.10gb"); seven > MilliPerGPU {
		t.Errorf("seven 1g slices count %d milli-GPU, more than the GPU", seven)
	}
}

// TestMIGProfileSpec: a one-GPU replica may ask for a MIG profile; a bad
// profile, several GPUs or a share as well are errors naming
// gang.migProfile, and the queue entry carries the profile.
func TestMIGProfileSpec(t *testing.T) {
	tests := map[string]struct {
		profile, share string
		gpus           int
		wantField      string // "" for valid
	}{
		"one slice":       {profile: "1g.10gb", gpus: 1},
		"bad profile":     {profile: "small", gpus: 1, wantField: "gang.migProfile"},
		"several GPUs":    {profile: "1g.10gb", gpus: 2, wantField: "gang.migProfile"},
		"and a share too": {profile: "1g.10gb", share: "0.5", gpus: 1, wantField: "gang.migProfile"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := validSpec()
			s.Gang.Replicas, s.Gang.GPUsPerReplica, s.Gang.MIGProfile, s.Gang.GPUShare = 1, tc.gpus, tc.profile, tc.share
			s.Default()
			probs := problemsOf(t, s.Validate())
			if tc.wantField != "" {
				if len(probs) != 1 || probs[0].Field != tc.wantField {
					t.Fatalf("problems %v, want one naming %s", probs, tc.wantField)
				}
				return
			}
			if len(probs) != 0 {
				t.Fatalf("problems %v", probs)
			}
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			q := s.QueueEntry(1, now, now)
			if !q.MIG() || q.MIGProfile != tc.profile || q.Share() {
				t.Errorf("queue entry MIG %v profile %q share %v; want the MIG profile %q and no share", q.MIG(), q.MIGProfile, q.Share(), tc.profile)
			}
			if got := q.MeteredMilli("H100"); got != int64(MIGMilli("H100", tc.profile)) {
				t.Errorf("metered %d milli-GPU, want %d", got, MIGMilli("H100", tc.profile))
			}
		})
	}
}

// TestMeteredMilli: shares and MIG devices are billed at their share of a
// GPU, whole GPUs whole; old segments without GPUMilli bill whole GPUs.
func TestMeteredMilli(t *testing.T) {
	a := Assignment{Members: []Member{
		{GPUs: []int{0, 1}},
		{GPUs: []int{2}, Milli: 500},
		{GPUs: []int{3}, MIG: "3g.40gb", MIGMilli: 428},
	}}
	if got, want := a.GPUMilli(), int64(2000+500+428); got != want {
		t.Errorf("GPUMilli = %d, want %d", got, want)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		seg  UsageSegment
		want float64
	}{
		{UsageSegment{GPUs: 2, Start: t0, End: t0.Add(10 * time.Second)}, 20},
		{UsageSegment{GPUs: 2, GPUMilli: 2000, Start: t0, End: t0.Add(10 * time.Second)}, 20},
		{UsageSegment{GPUs: 1, GPUMilli: 500, Start: t0, End: t0.Add(10 * time.Second)}, 5},
		{UsageSegment{GPUs: 1, GPUMilli: 500, Start: t0, End: t0.Add(time.Hour), PricePerGPUHour: 2}, 1800},
	} {
		if got := tc.seg.GPUSeconds(); got != tc.want {
			t.Errorf("%+v: GPUSeconds %v, want %v", tc.seg, got, tc.want)
		}
	}
	half := UsageSegment{GPUs: 1, GPUMilli: 500, Start: t0, End: t0.Add(time.Hour), PricePerGPUHour: 2}
	if got := half.Dollars(); got != 1 {
		t.Errorf("an hour of half a $2 GPU costs $%v, want $1", got)
	}
}
