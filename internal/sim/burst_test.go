package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// TestBurstReplay: with a cloud to rent, each policy is replayed once per
// BurstRuntimes entry; every job is accounted for (run on-prem or in the
// cloud, or never placed), jobs burst, what they rented is priced at the
// cloud's price per GPU, the report and --output json say so, and past a
// wait threshold no job reaches only the jobs that would never start
// on-prem burst.
func TestBurstReplay(t *testing.T) {
	run := func(b *TraceBurst) *TraceResult {
		t.Helper()
		cfg := exampleConfig(t, GangwayPolicy)
		cfg.ETA, cfg.Burst = &ETAConfig{}, b
		res, err := RunTrace(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	const price = 3.0
	res := run(&TraceBurst{PricePerGPUHour: price, After: time.Minute, Boot: 5 * time.Minute})
	if len(res.Runs) != len(BurstRuntimes) {
		t.Fatalf("%d runs, want one per burst mode (%d)", len(res.Runs), len(BurstRuntimes))
	}
	for i, r := range res.Runs {
		if r.Burst != BurstRuntimes[i] {
			t.Errorf("run %d expects %q runtimes, want %q", i, r.Burst, BurstRuntimes[i])
		}
		if r.Bursts == 0 {
			t.Errorf("%s: no job burst", r.Label())
		}
		if got := r.Finished + r.NeverPlaced + r.Unfinished; got != r.Jobs || r.Placed < r.Bursts {
			t.Errorf("%s: finished %d + never placed %d + unfinished %d = %d of %d jobs (placed %d, burst %d)",
				r.Label(), r.Finished, r.NeverPlaced, r.Unfinished, got, r.Jobs, r.Placed, r.Bursts)
		}
		if want := r.CloudGPUSeconds / 3600 * price; math.Abs(r.CloudCost-want) > 1e-6*want {
			t.Errorf("%s: cloud cost $%.2f for %.1f GPU-h at $%g, want $%.2f", r.Label(), r.CloudCost, r.CloudGPUSeconds/3600, price, want)
		}
		if c := r.CostPerUsefulGPUHour(); !(c >= price) {
			t.Errorf("%s: $%.2f per useful GPU-hour, below the price $%g", r.Label(), c, price)
		}
	}
	var text, js bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Bursting: every job may rent on-demand GPUs at $3.00/GPU-h", "gangway +burst/declared", "gangway +burst/learned", "gangway +burst/exact"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(js.String()), "\n") {
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatal(err)
		}
		if o["burst_runtimes"] != BurstRuntimes[i] || o["bursts"] == nil || o["cloud_cost"] == nil || o["cloud_gpu_hours"] == nil {
			t.Errorf("json line %d lacks the burst fields: %s", i, line)
		}
	}

	// Past any wait, only the jobs the decision sees never starting
	// on-prem burst: those no node could ever take (which a replay without
	// a cloud drops), and those whose GPUs the running jobs and the jobs
	// ahead would never free. Which those are depends on the runtimes the
	// forecast plays (a job it starts on-prem, however late, waits).
	unplaceable := run(nil).Runs[0].Unplaceable
	if unplaceable == 0 {
		t.Fatal("no job too large for the fleet: the case below tests nothing")
	}
	never := run(&TraceBurst{PricePerGPUHour: price, After: 1000 * time.Hour}).Runs
	for i, r := range never {
		if r.Bursts < unplaceable || r.Bursts >= res.Runs[i].Bursts || r.Unplaceable != 0 {
			t.Errorf("%s: %d bursts, %d unplaceable with a 1,000 h threshold; want at least the %d that never fit, fewer than the %d after a minute",
				r.Label(), r.Bursts, r.Unplaceable, unplaceable, res.Runs[i].Bursts)
		}
	}
}
