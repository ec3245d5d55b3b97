package sim

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestLeadingPolicyStyles checks that the policies the charts compare most
// are told apart by colour and by dash pattern, each on its own.
func TestLeadingPolicyStyles(t *testing.T) {
	leading := []string{GangwayPolicy, "fgd", "best-fit", "first-fit"}
	for i, a := range leading {
		for _, b := range leading[i+1:] {
			sa, sb := styleOf(a, 0), styleOf(b, 0)
			r1, g1, b1, _ := sa.Color.RGBA()
			r2, g2, b2, _ := sb.Color.RGBA()
			if r1 == r2 && g1 == g2 && b1 == b2 {
				t.Errorf("%s and %s have the same colour", a, b)
			}
			if slices.Equal(sa.Dashes, sb.Dashes) {
				t.Errorf("%s and %s have the same dash pattern %v", a, b, sa.Dashes)
			}
		}
	}
}

func TestWindowMean(t *testing.T) {
	run := &TraceRun{CapacityMilli: 1000, FirstSubmit: 5 * time.Second, Series: []Sample{
		{At: 0, AllocMilli: 800},                // before the first arrival: outside the window
		{At: 5 * time.Second, AllocMilli: 0},    // 10 s at 0
		{At: 15 * time.Second, AllocMilli: 500}, // 10 s at 50 %
		{At: 40 * time.Second, AllocMilli: 1000},
	}}
	if got := windowMean(run, 20*time.Second); math.Abs(got-25) > 1e-9 {
		t.Errorf("windowMean = %v, want 25", got)
	}
	// The last sample holds to the end of a longer window: 10 s at 0, 25 s
	// at 50 %, 5 s at 100 % over 40 s.
	if got := windowMean(run, 40*time.Second); math.Abs(got-100*(0.5*25+5)/40) > 1e-9 {
		t.Errorf("windowMean = %v, want %v", got, 100*(0.5*25+5)/40)
	}
}
