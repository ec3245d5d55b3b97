package placement

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

func shape(gpus, milli int) gangway.QueueEntry {
	return gangway.QueueEntry{Replicas: 1, GPUsPerReplica: gpus, GPUMilli: milli, CPUMilli: 1000, MemMiB: 1024}
}

// weights is the history's weight by whole GPUs and share.
func weights(h *WorkloadHistory) map[[2]int]float64 {
	out := map[[2]int]float64{}
	for _, c := range h.Classes() {
		out[[2]int{c.GPUs, c.Milli}] += c.Weight
	}
	return out
}

func TestWorkloadHistory(t *testing.T) {
	one, eight, half := shape(1, 0), shape(8, 0), shape(1, 500)
	t.Run("empty", func(t *testing.T) {
		var h WorkloadHistory
		if c := h.Classes(); c != nil {
			t.Errorf("Classes of an empty history = %v, want nil", c)
		}
	})
	t.Run("equal arrivals, long memory", func(t *testing.T) {
		h := WorkloadHistory{HalfLife: 1 << 30}
		for range 100 {
			h.Add(&one)
			h.Add(&eight)
		}
		w := weights(&h)
		if math.Abs(w[[2]int{1, 1000}]-0.5) > 1e-6 || math.Abs(w[[2]int{8, 1000}]-0.5) > 1e-6 {
			t.Errorf("weights %v, want half each", w)
		}
	})
	t.Run("recent arrivals weigh more", func(t *testing.T) {
		h := WorkloadHistory{HalfLife: 100}
		for range 300 {
			h.Add(&one)
		}
		for range 100 {
			h.Add(&half)
		}
		// The 100 shares are a quarter of the arrivals; with a half-life
		// of 100 they weigh about 2^4 − 2^3 against 2^3 − 1 for the 300
		// ones before them: 8/15.
		if got := weights(&h)[[2]int{1, 500}]; math.Abs(got-8.0/15) > 0.01 {
			t.Errorf("weight of the recent shares %.4f, want about %.4f", got, 8.0/15)
		}
	})
	t.Run("renormalized many times, faded classes dropped", func(t *testing.T) {
		h := WorkloadHistory{HalfLife: 10}
		h.Add(&eight)
		for range 20000 {
			h.Add(&one)
			h.Add(&half)
		}
		w := weights(&h)
		if len(w) != 2 || math.Abs(w[[2]int{1, 1000}]-w[[2]int{1, 500}]) > 0.05 {
			t.Errorf("weights %v, want the two recent classes about equal and the 8-GPU one gone", w)
		}
		for _, c := range h.Classes() {
			if math.IsNaN(c.Weight) || math.IsInf(c.Weight, 0) {
				t.Fatalf("class %v has weight %v", c, c.Weight)
			}
		}
	})
	t.Run("WorkloadFromJobs is a history that forgets nothing", func(t *testing.T) {
		jobs := []gangway.QueueEntry{one, eight, eight, half}
		w := map[[2]int]float64{}
		for _, c := range WorkloadFromJobs(jobs) {
			w[[2]int{c.GPUs, c.Milli}] = c.Weight
		}
		want := map[[2]int]float64{{1, 1000}: 0.25, {8, 1000}: 0.5, {1, 500}: 0.25}
		for k, v := range want {
			if math.Abs(w[k]-v) > 1e-12 {
				t.Errorf("WorkloadFromJobs weights %v, want %v", w, want)
				break
			}
		}
	})
}

// TestWorkloadHistoryRestore: a history restored from another's Classes
// and Weight — saved as JSON, as the dispatch leader stores it — goes on
// as the original does: the same classes and weights after the same
// arrivals, and a Weight that levels off near HalfLife ÷ ln 2.
func TestWorkloadHistoryRestore(t *testing.T) {
	one, eight, half := shape(1, 0), shape(8, 0), shape(1, 500)
	constrained := shape(2, 0)
	constrained.GPUModels = []string{"H100", "A100"}
	orig := WorkloadHistory{HalfLife: 50}
	for i := range 400 {
		switch i % 4 {
		case 0:
			orig.Add(&eight)
		case 1:
			orig.Add(&constrained)
		default:
			orig.Add(&one)
		}
	}
	if w, level := orig.Weight(), 50/math.Ln2; math.Abs(w-level) > 0.05*level {
		t.Errorf("Weight after 400 arrivals with a half-life of 50 = %.1f, want about %.1f", w, level)
	}
	raw, err := json.Marshal(orig.Classes())
	if err != nil {
		t.Fatal(err)
	}
	var saved []WorkloadClass
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	restored := WorkloadHistory{HalfLife: 50}
	restored.Restore(saved, orig.Weight())
	for range 30 {
		orig.Add(&half)
		restored.Add(&half)
	}
	near := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
	if diff := cmp.Diff(orig.Classes(), restored.Classes(), near); diff != "" {
		t.Errorf("restored history after 30 more arrivals (-original +restored):\n%s", diff)
	}
	if math.Abs(orig.Weight()-restored.Weight()) > 1e-6 {
		t.Errorf("Weight: original %v, restored %v", orig.Weight(), restored.Weight())
	}
	var none WorkloadHistory
	none.Restore(saved, 0)
	if none.Classes() != nil || none.Weight() != 0 {
		t.Errorf("a restore of no arrivals left %v, weight %v", none.Classes(), none.Weight())
	}
}

func TestTypical(t *testing.T) {
	cls := []WorkloadClass{{GPUs: 1, Weight: 0.5}, {GPUs: 8, Weight: 0.03}, {GPUs: 2, Weight: 0.3}, {GPUs: 4, Weight: 0.17}}
	got := Typical(cls, TypicalPopularity)
	// 0.5 + 0.3 + 0.17 = 0.97 covers 95%: the 8-GPU class is cut, the
	// rest renormalized, most popular first.
	want := []WorkloadClass{{GPUs: 1, Weight: 0.5 / 0.97}, {GPUs: 2, Weight: 0.3 / 0.97}, {GPUs: 4, Weight: 0.17 / 0.97}}
	if len(got) != len(want) {
		t.Fatalf("Typical = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].GPUs != want[i].GPUs || math.Abs(got[i].Weight-want[i].Weight) > 1e-12 {
			t.Errorf("Typical = %v, want %v", got, want)
			break
		}
	}
	if cls[0].Weight != 0.5 || cls[1].GPUs != 8 {
		t.Errorf("Typical changed its input: %v", cls)
	}
	if Typical(nil, TypicalPopularity) != nil {
		t.Error("Typical of nothing is not nil")
	}
}
