package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
	"github.com/gangwayhq/gangway/workflows"
)

// TraceBurst lets every job of an estimating replay (TraceConfig.ETA) rent
// cloud capacity, as the server's burst decision sends it there: when its
// expected on-prem wait is longer than After (placement.Options.BurstAfter)
// it leaves the queue, its instances start it Boot later, it runs its work
// there and pays for every GPU of them, on demand (no interruptions).
// RunTrace replays each policy once per BurstRuntimes entry: the decision
// expecting what the jobs declared, what the start-time estimator learned,
// and the truth.
type TraceBurst struct {
	// PricePerGPUHour is the on-demand price of a cloud GPU, in dollars;
	// the cloud offers instances of 1, 2, 4 and 8 GPUs of every model in
	// the fleet at that price per GPU.
	PricePerGPUHour float64
	// After is the on-prem wait from which a job bursts; Boot how long its
	// instances take to start it.
	After, Boot time.Duration
}

// Whose runtimes the burst decision expects (placement.Options.Predicted),
// per run: BurstDeclared the jobs' limits (no predictions), BurstLearned
// the server's start-time estimator's model, learned from the runs that
// ended, BurstExact every job's true runtime (what the rule means).
const (
	BurstDeclared = "declared"
	BurstLearned  = "learned"
	BurstExact    = "exact"
)

// BurstRuntimes are the burst runs of each policy, in report order.
var BurstRuntimes = []string{BurstDeclared, BurstLearned, BurstExact}

// cloudGPUs are the instance sizes the replay's cloud offers.
var cloudGPUs = []int{1, 2, 4, 8}

// cloudOffers are the on-demand offers of the replay's cloud: every size of
// every GPU model in the fleet, at the same price per GPU.
func cloudOffers(b *TraceBurst, nodes []placement.Node) []gangway.Offer {
	var models []string
	for _, n := range nodes {
		if n.Model != "" && !slices.Contains(models, n.Model) {
			models = append(models, n.Model)
		}
	}
	slices.Sort(models)
	var out []gangway.Offer
	for _, m := range models {
		for _, g := range cloudGPUs {
			out = append(out, gangway.Offer{Provider: "replay", Pool: "replay-cloud", Zone: "replay-1",
				InstanceType: fmt.Sprintf("%s-x%d", m, g), GPUModel: m, GPUsPerInstance: g,
				CapacityType: gangway.CapacityOnDemand, PricePerHour: b.PricePerGPUHour * float64(g)})
		}
	}
	return out
}

// burstEstimator is the estimator whose model the loop's burst decision
// reads (dispatch.Config.ETA) for a run of mode, and the others, fed
// alike (ETAAlso). With BurstDeclared it is the Slurm-style one, whose
// model is the declared limits: the same decisions as no predictions.
func (st *etaState) burstEstimator(mode string) (*forecast.Estimator, []*forecast.Estimator) {
	first := etaLearned
	switch mode {
	case BurstDeclared:
		first = etaLimits
	case BurstExact:
		first = etaExact
	}
	var also []*forecast.Estimator
	for e := range nEstimators {
		if e != first {
			also = append(also, st.est[e])
		}
	}
	return st.est[first], also
}

// rent plays the workflow's burst saga for job k at t: the job leaves the
// queue for the cheapest offer the decision ranked first, starts there
// after Boot, runs its work, and pays for the instances' GPUs throughout.
func (r *replay) rent(k int, req workflows.BurstRequest, t time.Duration) {
	s := &r.st[k]
	o := req.Offers[0]
	start := t + r.burst.Boot
	r.dequeue(k, stCloud, start)
	rented := (r.burst.Boot + s.remaining).Seconds() * float64(o.Count*o.GPUsPerInstance)
	r.out.Bursts++
	r.out.CloudGPUSeconds += rented
	r.out.CloudCost += rented / 3600 * o.PricePerGPUHourFor(o.GPUsPerInstance)
	r.out.CloudWorkGPUSeconds += s.remaining.Seconds() * gpuShare(&r.jobs[k].Job)
	r.push(event{at: start + s.remaining, job: k, attempt: s.attempt})
}

// finishCloud ends job k, which ran its work on rented capacity.
func (r *replay) finishCloud(k int, t time.Duration) {
	r.wf.End(r.jobs[k].Job.JobID)
	r.st[k].state = stDone
	r.st[k].remaining = 0
	r.out.Finished++
	r.out.End = max(r.out.End, t)
}

// CostPerUsefulGPUHour is what the cloud cost per GPU-hour of the jobs'
// work it ran (boot time and the GPUs an instance has beyond a job's are
// paid for, not useful); NaN when nothing burst.
func (r *TraceRun) CostPerUsefulGPUHour() float64 {
	if r.CloudWorkGPUSeconds <= 0 {
		return math.NaN()
	}
	return r.CloudCost / (r.CloudWorkGPUSeconds / 3600)
}
