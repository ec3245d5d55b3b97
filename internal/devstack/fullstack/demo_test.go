package fullstack

import (
	"testing"
	"time"
)

// The demo workload is valid, uniquely named, and overflows the default
// fleet (4 × 8 GPUs) so that some jobs burst.
func TestDemoSpecs(t *testing.T) {
	specs := DemoSpecs("/bin/gangway", 100*time.Millisecond, "x")
	names := map[string]bool{}
	gpus, burst := 0, 0
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if names[s.Name] {
			t.Errorf("%s twice", s.Name)
		}
		names[s.Name] = true
		gpus += s.Gang.Replicas * s.Gang.GPUsPerReplica
		if s.Burst.Enabled {
			burst++
		}
	}
	if len(specs) != 22 || gpus <= 32 || burst == 0 {
		t.Errorf("%d jobs, %d GPUs, %d may burst; want 22 jobs, more than 32 GPUs, some bursting", len(specs), gpus, burst)
	}
}
