package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWriteText(t *testing.T) {
	ok := Step{Rate: 5, Nodes: 10, GPUs: 80, Submitted: 50, Started: 50, LatencyP99S: 0.4, StartsPerS: 5,
		CPU: map[string]float64{"temporal": 2}, CPUPerJob: map[string]float64{"temporal": 40}, HistoryEvents: 46}
	sat := Step{Rate: 10, Nodes: 10, GPUs: 80, Submitted: 100, Started: 60, Saturated: true, Why: "40 of 100 jobs not started",
		Busiest: "temporal", CPU: map[string]float64{"temporal": 4}}
	r := Result{Step: sat, Steps: []Step{ok, sat}, SaturationRate: 10, StartsPerSPeak: 5, Cores: 2, At: time.Unix(0, 0).UTC()}
	var b bytes.Buffer
	r.WriteText(&b)
	out := b.String()
	for _, want := range []string{"10 nodes × 8 GPUs", "saturated, busiest temporal", "temporal 40.0",
		"46 history events", "saturated at 10 submits/s (40 of 100 jobs not started); busiest there: temporal"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
