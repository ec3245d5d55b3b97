package sim

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
)

// ETAConfig turns on the measurement of start-time estimates in a trace
// replay (`gangway replay trace --eta`). Each policy's dispatch loop
// estimates every waiting job's start as the server does, with a runtime
// model it learns from the runs it sees end; jobs declare only limits:
// max runtime = work × a factor drawn per job, seeded, log-uniform in
// [1, MaxFactor]. Beside it, fed the same snapshots on the same cycles,
// an estimator that knows every runtime exactly, and the Slurm-style
// baseline (every job runs to its limit, no calibration).
type ETAConfig struct {
	// MaxFactor bounds how much longer than its work a job's limit is
	// (default DefaultLimitFactor); 1 makes limits exact.
	MaxFactor float64
	// Options tune the estimators.
	Options forecast.Options
	// limitsOnly gives jobs their limits and runs no estimator: the load
	// probes of LoadedFleet.
	limitsOnly bool
}

// DefaultLimitFactor is the default ETAConfig.MaxFactor: limits from 1 to
// 4 times the work, the spread of requested over actual runtimes HPC
// workload logs show (users ask for about 2 to 3 times what they use, with
// a long tail).
const DefaultLimitFactor = 4.0

// ETASpeedup is `gangway replay trace --eta`'s default --speedup: a
// public trace loads only a small share of its fleet (LoadedFleet), and
// compressing its arrivals tenfold makes that share tens of nodes rather
// than a handful.
const ETASpeedup = 10.0

// DispatchInterval is the server's default cycle interval: the unit the
// replay's waits are measured in against the load criterion (--eta's
// defaults make the median wait of jobs that wait at least ten of them).
const DispatchInterval = 500 * time.Millisecond

// Estimators compared in an ETA replay.
const (
	etaLearned = iota // the server's: limits only, runtimes learned
	etaExact          // every runtime known
	etaLimits         // Slurm-style: every job lasts its limit
	nEstimators
)

// etaRecord is one job's first-attempt estimates: the one made when it
// was submitted (its first cycle in the queue) and how often it changed.
type etaRecord struct {
	have    bool
	first   forecast.Estimate
	last    forecast.Estimate
	changes int
}

// etaState is one replay's estimators and what they said.
type etaState struct {
	factor []float64 // per job: limit ÷ work
	est    [nEstimators]*forecast.Estimator
	rec    [nEstimators][]etaRecord
	// history is every change of the learned estimator's estimates, for
	// --csv.
	history []ETAChange
}

// ETAChange is one new estimate of a job's start (at submit or changed).
type ETAChange struct {
	Job      gangway.JobID
	At       time.Duration // virtual time the estimate was made
	P50, P90 time.Duration // predicted start, virtual time
	Beyond   bool
}

func newETAState(cfg *ETAConfig, jobs []TraceJob, seed uint64, oracle forecast.Runtimes) *etaState {
	st := &etaState{factor: limitFactors(len(jobs), cmpOr(cfg.MaxFactor, DefaultLimitFactor), seed)}
	if cfg.limitsOnly {
		return st
	}
	o := cfg.Options
	st.est[etaLearned] = forecast.NewEstimator(forecast.NewHistory(), o)
	st.est[etaExact] = forecast.NewEstimator(oracle, o)
	base := o
	base.NoCalibration = true
	st.est[etaLimits] = forecast.NewEstimator(forecast.Limits{}, base)
	for i := range st.rec {
		st.rec[i] = make([]etaRecord, len(jobs))
	}
	return st
}

func cmpOr(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}

// limitFactors draws each job's limit ÷ work, log-uniform in [1, hi].
func limitFactors(n int, hi float64, seed uint64) []float64 {
	rnd := rand.New(rand.NewPCG(seed, 0x6c696d697473)) // "limits"
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Pow(hi, rnd.Float64())
	}
	return out
}

// measuring reports whether the replay runs estimators.
func (st *etaState) measuring() bool { return st != nil && st.est[etaLearned] != nil }

// note records the estimators' estimates for job k's first attempt after
// a cycle at t.
func (st *etaState) note(k int, id gangway.JobID) {
	for e := range nEstimators {
		est, ok := st.est[e].Estimate(id)
		if !ok {
			continue
		}
		r := &st.rec[e][k]
		switch {
		case !r.have:
			r.have, r.first, r.last = true, est, est
		case !est.P50.Equal(r.last.P50) || !est.P90.Equal(r.last.P90):
			r.last = est
			r.changes++
		default:
			continue
		}
		if e == etaLearned {
			st.history = append(st.history, ETAChange{Job: id, At: est.At.Sub(TraceEpoch), P50: est.P50.Sub(TraceEpoch),
				P90: est.P90.Sub(TraceEpoch), Beyond: est.Beyond})
		}
	}
}

// ETAScore is how one estimator's estimates made at submit compared with
// the starts jobs got, over the jobs that waited and started.
type ETAScore struct {
	// Waited counts the jobs measured: they waited (not placed in the
	// cycle they arrived in), got an estimate, and started.
	Waited int
	// Within25 is the share whose real wait is within ±25% of the wait the
	// P50 predicted; P90Coverage the share that started by the P90;
	// MedianAbsError the median |real − predicted| wait, in seconds;
	// Beyond the share whose estimate lay past the forecast's horizon.
	Within25, P90Coverage, MedianAbsError, Beyond float64
	// Changes is the mean number of times a job's estimate changed
	// before it started.
	Changes float64
}

// ETARun is one policy's estimate measurement.
type ETARun struct {
	// Jobs counts the trace's jobs; Started those that started; Waited
	// those that started after waiting; MedianWait their median wait in
	// seconds.
	Jobs, Started, Waited int
	MedianWait            float64
	// Learned is the server's estimator, Exact the one that knows every
	// runtime, Limits the Slurm-style baseline; the Warm ones leave out the
	// first fifth of the jobs that waited (in submit order), estimated
	// before the estimators had runs to learn from and starts to
	// calibrate on.
	Learned, Exact, Limits             ETAScore
	WarmLearned, WarmExact, WarmLimits ETAScore
	// Forecasts and PlaceCalls are the learned estimator's.
	Forecasts, PlaceCalls int
	History               []ETAChange
}

// score measures the estimators against the real starts.
func (st *etaState) score(r *replay) ETARun {
	out := ETARun{Jobs: len(r.jobs), Forecasts: st.est[etaLearned].Forecasts, PlaceCalls: st.est[etaLearned].PlaceCalls,
		History: st.history}
	var waits []float64
	for k := range r.jobs {
		if r.firstStart[k] < 0 {
			continue
		}
		out.Started++
		if w := r.firstStart[k] - r.jobs[k].Submit; w > 0 {
			waits = append(waits, w.Seconds())
		}
	}
	out.Waited = len(waits)
	slices.Sort(waits)
	out.MedianWait = quantile(waits, 0.5)
	out.Learned, out.Exact, out.Limits = st.scoreOf(r, etaLearned, 0), st.scoreOf(r, etaExact, 0), st.scoreOf(r, etaLimits, 0)
	// r.jobs are in submit order: warm starts after the first fifth of
	// those that waited.
	warm, seen := len(r.jobs), 0
	for k := range r.jobs {
		if s := r.firstStart[k]; s > r.jobs[k].Submit {
			if seen++; seen > out.Waited/5 {
				warm = k
				break
			}
		}
	}
	out.WarmLearned, out.WarmExact, out.WarmLimits = st.scoreOf(r, etaLearned, warm), st.scoreOf(r, etaExact, warm),
		st.scoreOf(r, etaLimits, warm)
	return out
}

// scoreOf scores estimator e over the jobs from index from on.
func (st *etaState) scoreOf(r *replay, e, from int) ETAScore {
	var s ETAScore
	var errs []float64
	within, covered, beyond, changes := 0, 0, 0, 0
	for k := from; k < len(r.jobs); k++ {
		rec := &st.rec[e][k]
		start := r.firstStart[k]
		submit := r.jobs[k].Submit
		if start < 0 || start <= submit || !rec.have {
			continue
		}
		real := (start - submit).Seconds()
		pred := (rec.first.P50.Sub(TraceEpoch) - submit).Seconds()
		errs = append(errs, math.Abs(real-pred))
		if math.Abs(real-pred) <= 0.25*real {
			within++
		}
		if !TraceEpoch.Add(start).After(rec.first.P90) {
			covered++
		}
		if rec.first.Beyond {
			beyond++
		}
		changes += rec.changes
	}
	s.Waited = len(errs)
	if s.Waited == 0 {
		s.Within25, s.P90Coverage, s.MedianAbsError, s.Beyond, s.Changes = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		return s
	}
	n := float64(s.Waited)
	slices.Sort(errs)
	s.Within25, s.P90Coverage, s.Beyond = float64(within)/n, float64(covered)/n, float64(beyond)/n
	s.MedianAbsError = quantile(errs, 0.5)
	s.Changes = float64(changes) / n
	return s
}

// oracle is the replay's knowledge of every job's true runtime, as a
// runtime model: a running job's work left, a queued job's whole run.
func (r *replay) oracle() forecast.Runtimes {
	return exactRuntimes{r}
}

type exactRuntimes struct{ r *replay }

func (x exactRuntimes) Remaining(j forecast.Job, elapsed time.Duration, _ float64) time.Duration {
	k, ok := x.r.byID[j.ID]
	if !ok {
		return 0
	}
	s := &x.r.st[k]
	if s.state == stRunning {
		return max(s.remaining-elapsed, 0)
	}
	return s.remaining
}

func (exactRuntimes) Point() bool { return true }

func (s ETAScore) String() string {
	return fmt.Sprintf("waited %d, within ±25%% %.3f, P90 coverage %.3f, median |error| %s", s.Waited, s.Within25,
		s.P90Coverage, FormatSeconds(s.MedianAbsError))
}

// ETAJSON is one estimator's calibration in `gangway replay trace --eta
// --output json`, with the Slurm-style baseline's beside it.
type ETAJSON struct {
	Waited                 int      `json:"waited"`
	Within25               *float64 `json:"within_25pct"`
	P90Coverage            *float64 `json:"p90_coverage"`
	MedianAbsError         *float64 `json:"median_abs_error_s"`
	BaselineWithin25       *float64 `json:"baseline_within_25pct"`
	BaselineP90Coverage    *float64 `json:"baseline_p90_coverage"`
	BaselineMedianAbsError *float64 `json:"baseline_median_abs_error_s"`
	BeyondHorizon          *float64 `json:"beyond_horizon"`
	ChangesMean            *float64 `json:"changes_mean"`
	// Warm is the same without the first fifth of the jobs that waited.
	Warm *ETAJSON `json:"warm,omitempty"`
	// The load: jobs that started after waiting, as a share of all jobs,
	// and their median wait in seconds and in dispatch intervals.
	WaitedShare         *float64 `json:"waited_share"`
	MedianWaitSeconds   *float64 `json:"median_wait_s"`
	MedianWaitIntervals *float64 `json:"median_wait_intervals"`
	Forecasts           int      `json:"forecasts"`
	PlaceCalls          int      `json:"forecast_place_calls"`
}

func (e *ETARun) json(s, warm ETAScore) *ETAJSON {
	out := e.jsonOf(s, e.Limits)
	out.Warm = e.jsonOf(warm, e.WarmLimits)
	out.Warm.Forecasts, out.Warm.PlaceCalls = 0, 0
	out.Warm.WaitedShare, out.Warm.MedianWaitSeconds, out.Warm.MedianWaitIntervals = nil, nil, nil
	return out
}

func (e *ETARun) jsonOf(s, base ETAScore) *ETAJSON {
	return &ETAJSON{Waited: s.Waited, Within25: ptr(s.Within25), P90Coverage: ptr(s.P90Coverage),
		MedianAbsError: ptr(s.MedianAbsError), BaselineWithin25: ptr(base.Within25),
		BaselineP90Coverage: ptr(base.P90Coverage), BaselineMedianAbsError: ptr(base.MedianAbsError),
		BeyondHorizon: ptr(s.Beyond), ChangesMean: ptr(s.Changes), WaitedShare: ptr(float64(e.Waited) / float64(max(e.Jobs, 1))),
		MedianWaitSeconds: ptr(e.MedianWait), MedianWaitIntervals: ptr(e.MedianWait / DispatchInterval.Seconds()),
		Forecasts: e.Forecasts, PlaceCalls: e.PlaceCalls}
}

// writeETA writes the estimate table, when the replay measured estimates.
func (r *TraceResult) writeETA(w io.Writer) error {
	if len(r.Runs) == 0 || r.Runs[0].ETA == nil {
		return nil
	}
	fmt.Fprintf(w, "\nStart-time estimates made at submit, over the jobs that waited and started (limits = work x [1, %g], seeded;\n"+
		"warm: without the first fifth of the jobs that waited):\n", r.LimitFactor)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\twaited\tshare\tmedian wait\testimator\twithin ±25%\tP90 coverage\tmedian |error|\twarm: within\tP90\t|error|\tbeyond horizon\tchanges\t")
	for i := range r.Runs {
		e := r.Runs[i].ETA
		for k, row := range []struct {
			name    string
			s, warm ETAScore
		}{{"learned, limits only", e.Learned, e.WarmLearned}, {"runtimes known", e.Exact, e.WarmExact},
			{"Slurm-style (limits)", e.Limits, e.WarmLimits}} {
			policy, waited, share, wait := "", "", "", ""
			if k == 0 {
				policy, waited = r.Runs[i].Label(), strconv.Itoa(e.Waited)
				share = num(100*float64(e.Waited)/float64(max(e.Jobs, 1)), "%.1f%%")
				wait = FormatSeconds(e.MedianWait)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", policy, waited, share, wait, row.name,
				num(row.s.Within25, "%.3f"), num(row.s.P90Coverage, "%.3f"), FormatSeconds(row.s.MedianAbsError),
				num(row.warm.Within25, "%.3f"), num(row.warm.P90Coverage, "%.3f"), FormatSeconds(row.warm.MedianAbsError),
				num(row.s.Beyond, "%.3f"), num(row.s.Changes, "%.1f"))
		}
	}
	return tw.Flush()
}

// FleetShare keeps about share of the nodes (0 < share <= 1): of each
// shape of node (GPU model and count), that share of them (rounded, at
// least one node in all), taken in a fixed pseudo-random order. A smaller
// fleet keeps the mix of shapes, and the fleet kept at one share holds
// the fleet kept at any smaller one, so the load grows as the share
// shrinks. Nodes stay in list order.
func FleetShare(nodes []placement.Node, share float64) []placement.Node {
	if share >= 1 || share <= 0 || len(nodes) == 0 {
		return nodes
	}
	type shape struct {
		model string
		gpus  int
	}
	groups := map[shape][]int{}
	var order []shape
	for i := range nodes {
		k := shape{nodes[i].Model, len(nodes[i].GPUs)}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	keep := make([]bool, len(nodes))
	kept, largest := 0, order[0]
	for _, k := range order {
		idx := groups[k]
		rnd := rand.New(rand.NewPCG(0x666c656574, uint64(len(idx)))) // "fleet"
		rnd.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
		n := int(math.Floor(share*float64(len(idx)) + 0.5))
		for _, i := range idx[:n] {
			keep[i] = true
		}
		kept += n
		if len(idx) > len(groups[largest]) {
			largest = k
		}
	}
	if kept == 0 {
		keep[groups[largest][0]] = true
	}
	var out []placement.Node
	for i := range nodes {
		if keep[i] {
			out = append(out, nodes[i])
		}
	}
	return out
}

// LoadedShare is the share of a fleet of capacity GPUs (0-1] at which jobs
// offer load times its GPU capacity: their GPU demand, each started on
// arrival and running its duration, over the window in which the middle
// 80% of them arrive (so a few stragglers at either end do not stretch
// it). 1 when even the whole fleet is that loaded.
func LoadedShare(jobs []TraceJob, capacity, load float64) float64 {
	if len(jobs) < 2 || capacity <= 0 || load <= 0 {
		return 1
	}
	submits := make([]time.Duration, len(jobs))
	for i := range jobs {
		submits[i] = jobs[i].Submit
	}
	slices.Sort(submits)
	lo, hi := submits[len(submits)/10], submits[len(submits)*9/10]
	if hi <= lo {
		return 1
	}
	work := 0.0
	for i := range jobs {
		start, end := max(jobs[i].Submit, lo), min(jobs[i].Submit+jobs[i].Duration, hi)
		if end > start {
			work += gpuShare(&jobs[i].Job) * (end - start).Seconds()
		}
	}
	offered := work / (hi - lo).Seconds() / capacity
	return min(1, offered/load)
}

// The load `gangway replay trace --eta` sizes the fleet for: at least
// TargetWaited of the jobs wait, the median wait of those at least
// MinWaitIntervals dispatch intervals (the issue asks for 20% and 10; the
// margin is for the estimate replays, which are not the probes).
const (
	TargetWaited     = 0.30
	MinWaitIntervals = 10
)

// LoadedFleet finds the share of cfg.Nodes (FleetShare) that loads the
// fleet as TargetWaited says: about the largest share at which a replay of
// the first policy, jobs declaring their limits but no estimates made, has
// at least TargetWaited of the jobs waiting with a median wait of at least
// MinWaitIntervals, by bisection from the share at which LoadedShare puts
// the offered load at 1.
// It returns 1 when the whole fleet is loaded so already, and reports each
// probe to probe (may be nil).
func LoadedFleet(ctx context.Context, cfg TraceConfig, probe func(share, waited, medianWait float64)) (float64, error) {
	limits := ETAConfig{limitsOnly: true}
	if cfg.ETA != nil {
		limits.MaxFactor = cfg.ETA.MaxFactor
	}
	cfg.ETA, cfg.Policies, cfg.Progress, cfg.Parallel = &limits, cfg.Policies[:1], nil, 1
	jobs := prepareJobs(cfg.Jobs, cmp.Or(cfg.Speedup, 1))
	all := cfg.Nodes
	loaded := func(share float64) (bool, error) {
		cfg.Nodes = FleetShare(all, share)
		res, err := RunTrace(ctx, cfg)
		if err != nil {
			return false, err
		}
		run := &res.Runs[0]
		var waits []float64
		for _, w := range run.Waits {
			if w > 0 {
				waits = append(waits, w)
			}
		}
		waited := float64(len(waits)) / float64(max(run.Jobs, 1))
		median := quantile(waits, 0.5) // sorted: run.Waits is
		if probe != nil {
			probe(share, waited, median)
		}
		return waited >= TargetWaited && median >= MinWaitIntervals*DispatchInterval.Seconds(), nil
	}
	if ok, err := loaded(1); ok || err != nil {
		return 1, err
	}
	// Bisect on a log scale: lo is loaded, hi is not.
	lo, hi := LoadedShare(jobs, float64(GPUCapacityMilli(all))/placement.Whole, 1), 1.0
	floor := 1 / float64(len(all))
	for ok, err := loaded(lo); !ok; ok, err = loaded(lo) {
		if err != nil {
			return 0, err
		}
		if lo <= floor {
			return floor, nil
		}
		hi, lo = lo, max(lo/2, floor)
	}
	best := lo
	for range 5 {
		mid := math.Sqrt(lo * hi)
		if len(FleetShare(all, mid)) == len(FleetShare(all, lo)) || len(FleetShare(all, mid)) == len(FleetShare(all, hi)) {
			break
		}
		ok, err := loaded(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo, best = mid, mid
		} else {
			hi = mid
		}
	}
	return best, nil
}
