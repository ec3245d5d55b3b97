package gangway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestGPUShare: a replica may ask for a share of one GPU, as a fraction or
// in milli-GPU, time-sliced by default or through MPS; anything else is an
// error naming gang.gpuShare or gang.sharing, and the queue entry carries
// the share.
func TestGPUShare(t *testing.T) {
	tests := map[string]struct {
		share     string
		sharing   Sharing
		gpus      int
		wantMilli int
		wantMode  Sharing
		wantField string // "" for valid
	}{
		"a fraction":         {share: "0.5", gpus: 1, wantMilli: 500, wantMode: SharingTimeSlicing},
		"milli-GPU, MPS":     {share: "250m", sharing: SharingMPS, gpus: 1, wantMilli: 250, wantMode: SharingMPS},
		"rounded up":         {share: "0.3333", gpus: 1, wantMilli: 334, wantMode: SharingTimeSlicing},
		"whole GPU":          {share: "1", gpus: 1, wantField: "gang.gpuShare"},
		"nothing":            {share: "0m", gpus: 1, wantField: "gang.gpuShare"},
		"not a quantity":     {share: "half", gpus: 1, wantField: "gang.gpuShare"},
		"several GPUs":       {share: "0.5", gpus: 2, wantField: "gang.gpuShare"},
		"unknown mode":       {share: "0.5", sharing: "mig", gpus: 1, wantField: "gang.sharing"},
		"mode with no share": {sharing: SharingMPS, gpus: 1, wantField: "gang.sharing"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := validSpec()
			s.Gang.Replicas, s.Gang.GPUsPerReplica, s.Gang.GPUShare, s.Gang.Sharing = 1, tc.gpus, tc.share, tc.sharing
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
			if q.GPUMilli != tc.wantMilli || !q.Share() || s.Gang.Sharing != tc.wantMode {
				t.Errorf("queue entry milli %d (share %v), mode %q; want %d, %q", q.GPUMilli, q.Share(), s.Gang.Sharing, tc.wantMilli, tc.wantMode)
			}
		})
	}
}

// TestParseGPUShareYAML: gpuShare reads as a bare number or a string.
func TestParseGPUShareYAML(t *testing.T) {
	for _, v := range []string{"0.5", `"0.5"`, "500m"} {
		spec, err := ParseJobSpec([]byte("name: s\nteam: t\ncommand: [\"true\"]\ngang: {replicas: 1, gpusPerReplica: 1, gpuShare: " + v + "}\n"))
		if err != nil {
			t.Fatalf("gpuShare: %s: %v", v, err)
		}
		if diff := cmp.Diff(500, spec.GPUMilli()); diff != "" {
			t.Errorf("gpuShare: %s: milli (-want +got):\n%s", v, diff)
		}
	}
}
