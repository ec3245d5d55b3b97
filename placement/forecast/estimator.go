package forecast

import (
	"math"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// Estimate is one waiting job's forecast.
type Estimate struct {
	JobID gangway.JobID
	// At is when it was made (the snapshot's time).
	At time.Time
	// P50 and P90 are the start's median and 90th percentile.
	P50, P90 time.Time
	// Beyond: the job did not start within the simulated horizon; P50
	// (and P90, if it too is Beyond) are the horizon, a lower bound.
	Beyond, Beyond90 bool
	// Burst: in the median simulation the job starts on rented capacity.
	Burst bool
	// WaitsFor are the jobs whose end frees what it needs (Start.WaitsFor,
	// from the median simulation).
	WaitsFor []gangway.JobID
	// Cloud is its cheapest cloud option now, nil when it has none;
	// Bursting that this cycle's plan sends it there (Cloud is then the
	// offer the plan rents first).
	Cloud    *gangway.BurstOffer
	Bursting bool
}

// PointModel is a Runtimes whose predictions do not depend on the
// quantile (Limits, a model that knows the runtimes): one simulation
// gives both P50 and P90.
type PointModel interface {
	Runtimes
	Point() bool
}

// Point implements PointModel.
func (Limits) Point() bool { return true }

// Forecast simulates in with rt at the median and the 90th percentile and
// returns an uncalibrated estimate for every queued job, with the number
// of Place calls it took.
func Forecast(in Input, rt Runtimes, o Options) (map[gangway.JobID]Estimate, int) {
	return forecast(in, rt, o, true)
}

// forecast is Forecast; without spread it simulates the median only and
// the P90 equals the P50 (calibration then spreads them).
func forecast(in Input, rt Runtimes, o Options, spread bool) (map[gangway.JobID]Estimate, int) {
	o = o.withDefaults()
	median := newSimulation(in, rt, 0.5, o)
	cloud := median.cloud()
	r50 := median.run()
	r90, calls := r50, r50.PlaceCalls
	if p, ok := rt.(PointModel); spread && (!ok || !p.Point()) {
		r90 = newSimulation(in, rt, 0.9, o).run()
		calls += r90.PlaceCalls
	}
	out := make(map[gangway.JobID]Estimate, len(in.Queue))
	for _, e := range in.Queue {
		s50, s90 := r50.Starts[e.JobID], r90.Starts[e.JobID]
		est := Estimate{JobID: e.JobID, At: in.Snapshot.Now, P50: s50.At, P90: s90.At, Beyond: !s50.Started,
			Beyond90: !s90.Started, Burst: s50.Burst, WaitsFor: s50.WaitsFor}
		if est.P90.Before(est.P50) {
			est.P90, est.Beyond90 = est.P50, est.Beyond
		}
		if b, ok := r50.Bursting[e.JobID]; ok {
			est.Cloud, est.Bursting = &b, true
		} else if c, ok := cloud[e.JobID]; ok {
			est.Cloud = &c
		}
		out[e.JobID] = est
	}
	return out, calls
}

// Estimator keeps a runtime model and the latest estimates for the
// dispatch loop: each cycle it Observes the snapshot (runs that ended
// teach the model, jobs that started score their first estimate), says
// when a forecast is Due, and calibrates what it forecasts. Not safe for
// concurrent use.
type Estimator struct {
	rt    Runtimes
	learn Learner
	o     Options

	cycles int
	est    map[gangway.JobID]Estimate
	// PlaceCalls counts the engine calls of every forecast so far;
	// Forecasts the forecasts.
	PlaceCalls, Forecasts int

	prev  map[gangway.JobID]gangway.Assignment
	first map[gangway.JobID]firstEstimate

	scores map[scoreKey]*ring
	// boost90 is, per priority, the logarithm of a factor every P90 of
	// that priority is multiplied by (beside the 90th percentile of the
	// scores, or ColdSpread before there are any), tracked as P90s are
	// judged (quantile tracking, an adaptive conformal method): each miss
	// raises it by trackRate × 0.9, each hit lowers it by trackRate × 0.1,
	// so that, over time, one in ten start after their P90 whatever the
	// workload does. A P90 is judged when the job starts, or as a miss as
	// soon as the job has waited past it or the latest simulation starts
	// it past it (work that arrived later went ahead): in a burst, while
	// jobs queue far longer than estimated, the factor rises before any of
	// them has started to show it.
	// The P50 is left alone: chasing the share of late starts there swings
	// it into the tails of the scores, where a ±25% estimate is lost.
	boost90 map[int]float64
	// learned counts what was learned (Learned, state.go).
	learned int64
}

// firstEstimate is the first estimate of one attempt: the wait the
// median simulation gave, uncalibrated, the job's priority, the P90 wait
// shown, and whether that P90 has been judged (boost90).
type firstEstimate struct {
	attempt  int
	priority int
	at       time.Time
	w50      time.Duration
	shown90  time.Duration
	judged   bool
	// projected is the wait from at to the start the latest median
	// simulation gave, uncalibrated: while the job waits, work that
	// arrived after it and goes ahead pushes that start out, long before
	// the job starts and shows how late it is.
	projected time.Duration
}

// trackRate is how far one judged P90 moves boost90 (the step size of
// the quantile tracking). The tracking's guarantee — the share of misses
// over n judged P90s is within about (the range boost90 moves in) ÷
// (trackRate × n) of one in ten — wants it large; the P90's jitter from
// one job to the next wants it small.
const trackRate = 0.1

// maxBoost bounds boost90 either way (a factor of e^4, about 55).
const maxBoost = 4.0

// scoreKey groups the scores calibrated together: one priority and one
// band of predicted wait, one priority and every band, or everything.
// Jobs of different priorities are delayed differently by the work that
// arrives after them, so their estimates are calibrated apart (Mondrian
// conformal prediction), falling back to the coarser group while a group
// has fewer than Options.MinScores.
type scoreKey struct{ priority, band int }

const (
	anyPriority = math.MinInt
	allBands    = -1
	// maxScoreKeys bounds the groups: past it, a new priority is
	// calibrated with everything.
	maxScoreKeys = 64
)

func scoreKeys(priority int, w time.Duration) [3]scoreKey {
	return [3]scoreKey{{priority, bandOf(w)}, {priority, allBands}, {anyPriority, allBands}}
}

// window is how many scores a group keeps: more for coarser groups.
func (e *Estimator) window(k int) int { return e.o.Window << k }

// Bands of predicted wait, calibrated apart: under a minute, ten
// minutes, an hour, six hours, and longer.
var bandEdges = [...]time.Duration{time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}

const nBands = len(bandEdges) + 1

func bandOf(w time.Duration) int {
	for b, e := range bandEdges {
		if w < e {
			return b
		}
	}
	return len(bandEdges)
}

// ring keeps the last n values.
type ring struct {
	v    []float64
	next int
}

func (r *ring) add(x float64, n int) {
	if len(r.v) < n {
		r.v = append(r.v, x)
		return
	}
	r.v[r.next] = x
	r.next = (r.next + 1) % n
}

// NewEstimator returns an Estimator over rt; nil means a learned History.
func NewEstimator(rt Runtimes, o Options) *Estimator {
	if rt == nil {
		rt = NewHistory()
	}
	e := &Estimator{rt: rt, o: o.withDefaults(), est: map[gangway.JobID]Estimate{},
		prev: map[gangway.JobID]gangway.Assignment{}, first: map[gangway.JobID]firstEstimate{}, scores: map[scoreKey]*ring{},
		boost90: map[int]float64{}}
	e.learn, _ = rt.(Learner)
	return e
}

// Runtimes is the estimator's runtime model.
func (e *Estimator) Runtimes() Runtimes { return e.rt }

// Observe learns from one cycle's snapshot and queue, before the cycle's
// plan commits. A run that was in the previous snapshot and is gone ended
// about now; unless stopped says the scheduler stopped it (preempted,
// drained) or it is back in the queue (requeued), the model learns its
// runtime. A waiting job that now runs scores its first estimate for the
// calibration, unless it runs since the instant that estimate was made
// (the plan of that very cycle placed it: it never waited). stopped may
// be nil.
func (e *Estimator) Observe(s placement.Snapshot, queue []gangway.QueueEntry, stopped func(gangway.JobID) bool) {
	now := s.Now
	queued := make(map[gangway.JobID]int, len(queue))
	for i := range queue {
		queued[queue[i].JobID] = queue[i].Attempt
	}
	cur := make(map[gangway.JobID]gangway.Assignment, len(s.Running))
	for _, a := range s.Running {
		cur[a.JobID] = a
	}
	if e.learn != nil {
		var ended []gangway.Assignment
		for id, a := range e.prev {
			if c, ok := cur[id]; ok && c.Attempt == a.Attempt {
				continue
			}
			if _, requeued := queued[id]; requeued || (stopped != nil && stopped(id)) {
				continue
			}
			if c, ok := cur[id]; ok && c.Attempt != a.Attempt {
				continue // stopped and placed again in between
			}
			ended = append(ended, a)
		}
		// Map order must not decide what a decaying model keeps.
		slices.SortFunc(ended, func(a, b gangway.Assignment) int {
			if c := a.At.Compare(b.At); c != 0 {
				return c
			}
			return compareIDs(a.JobID, b.JobID)
		})
		for _, a := range ended {
			e.learn.Observe(RunningJob(&a), now.Sub(a.At))
			e.learned++
		}
	}
	e.prev = cur
	if e.o.NoCalibration {
		clear(e.first)
		return
	}
	var started []gangway.JobID
	for id, f := range e.first {
		a, running := cur[id]
		switch {
		case running && a.Attempt == f.attempt && a.At.Equal(f.at):
			// Placed by the plan of the cycle its estimate was made in:
			// it never waited on it, and its estimate was never shown.
			delete(e.first, id)
		case running && a.Attempt == f.attempt && a.At.After(f.at):
			started = append(started, id)
		case !running && queued[id] != f.attempt:
			delete(e.first, id) // cancelled, sent to the cloud, or a new attempt
		}
	}
	slices.SortFunc(started, compareIDs)
	e.judgeLate(now, cur)
	for _, id := range started {
		f := e.first[id]
		e.score(f, cur[id].At.Sub(f.at))
		delete(e.first, id)
	}
}

func compareIDs(a, b gangway.JobID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// score adds how a first estimate compared with the wait it predicted:
// the ratio of the real wait to the median simulation's (both plus
// Slack), whose median and 90th percentile scale later estimates.
func (e *Estimator) score(f firstEstimate, actual time.Duration) {
	e.learned++
	if !f.judged {
		e.track(f.priority, actual > f.shown90)
	}
	s := e.ratio(actual, f.w50)
	for k, key := range scoreKeys(f.priority, f.w50) {
		if r := e.scoreRing(key); r != nil {
			r.add(s, e.window(k))
		}
	}
}

// scoreRing is key's group of scores, made if need be; nil when the
// groups are at maxScoreKeys and key is a new one of a priority.
func (e *Estimator) scoreRing(key scoreKey) *ring {
	r := e.scores[key]
	if r == nil {
		if len(e.scores) >= maxScoreKeys && key.priority != anyPriority {
			return nil
		}
		r = &ring{}
		e.scores[key] = r
	}
	return r
}

// judgeLate judges, as a miss, the P90 of every first estimate whose job
// still waits past it or that the latest simulation starts past it. Jobs are judged in order of their first estimate,
// so map order does not matter.
func (e *Estimator) judgeLate(now time.Time, running map[gangway.JobID]gangway.Assignment) {
	var late []gangway.JobID
	for id, f := range e.first {
		if _, started := running[id]; !f.judged && !started && max(now.Sub(f.at), f.projected) > f.shown90 {
			late = append(late, id)
		}
	}
	slices.SortFunc(late, func(a, b gangway.JobID) int {
		if c := e.first[a].at.Compare(e.first[b].at); c != 0 {
			return c
		}
		return compareIDs(a, b)
	})
	for _, id := range late {
		f := e.first[id]
		f.judged = true
		e.first[id] = f
		e.track(f.priority, true)
	}
}

// track moves a priority's boost90 after one of its P90s was judged.
func (e *Estimator) track(priority int, late bool) {
	e.learned++
	miss := 0.0
	if late {
		miss = 1
	}
	if _, ok := e.boost90[priority]; !ok && len(e.boost90) >= maxScoreKeys {
		return // bounded, as the score groups are
	}
	e.boost90[priority] = min(max(e.boost90[priority]+trackRate*(miss-0.1), -maxBoost), maxBoost)
}

func (e *Estimator) ratio(actual, predicted time.Duration) float64 {
	return float64(max(actual, 0)+e.o.Slack) / float64(max(predicted, 0)+e.o.Slack)
}

// Due counts a cycle and reports whether it should forecast: every
// Options.Every cycles, or at once when one of waiting has no estimate.
func (e *Estimator) Due(waiting []gangway.JobID) bool {
	e.cycles++
	if e.cycles >= e.o.Every {
		return true
	}
	for _, id := range waiting {
		if _, ok := e.est[id]; !ok {
			return true
		}
	}
	return false
}

// Forecast replaces the estimates with a forecast of in, calibrated, and
// remembers each attempt's first one.
func (e *Estimator) Forecast(in Input) {
	e.cycles = 0
	c := e.calibration(in.Snapshot.Now)
	// Once estimates are calibrated, the median simulation is enough: the
	// calibration spreads its waits into P50 and P90.
	f, _ := c.factor(scoreKey{anyPriority, allBands})
	calibrated := f.ok50
	raw, calls := forecast(in, e.rt, e.o, e.o.NoCalibration || !calibrated)
	e.PlaceCalls += calls
	e.Forecasts++
	jobs := make(map[gangway.JobID]*gangway.QueueEntry, len(in.Queue))
	for i := range in.Queue {
		jobs[in.Queue[i].JobID] = &in.Queue[i]
	}
	e.est = make(map[gangway.JobID]Estimate, len(raw))
	for id, r := range raw {
		j := jobs[id]
		cal := e.calibrate(r, j.Priority, c)
		switch f, seen := e.first[id]; {
		case e.o.NoCalibration || r.Bursting:
		case !seen || f.attempt != j.Attempt:
			e.learned++
			e.first[id] = firstEstimate{attempt: j.Attempt, priority: j.Priority, at: r.At, w50: r.P50.Sub(r.At),
				shown90: cal.P90.Sub(r.At), projected: r.P50.Sub(r.At)}
		default:
			f.projected = r.P50.Sub(f.at)
			e.first[id] = f
		}
		e.est[id] = cal
	}
}

// Estimate is the latest estimate for a job.
func (e *Estimator) Estimate(id gangway.JobID) (Estimate, bool) {
	est, ok := e.est[id]
	return est, ok
}

// calibration is the groups' factors at one instant, worked out as asked.
type calibration struct {
	e *Estimator
	// late are the still-waiting jobs past their first estimate, by how
	// long they have waited (the P50's); late90 also those the latest
	// simulation starts past it, at the later of the two (the P90's).
	late, late90 map[scoreKey][]float64
	factors      map[scoreKey]groupFactor
}

// groupFactor is a group's median and 90th percentile of the scores; ok
// when it has the P90's, ok50 when the median's too.
type groupFactor struct {
	f50, f90 float64
	ok, ok50 bool
}

// calibration counts each still-waiting job that has already waited longer
// than its first estimate said as at least how far it is over, so that
// slow starts are not left out until they happen; for the P90, also one
// that the latest simulation starts later than that (work that arrived
// after it goes ahead). The P50 leaves those out: a simulated start is no
// lower bound, and the median would follow them into the tail.
func (e *Estimator) calibration(now time.Time) *calibration {
	c := &calibration{e: e, late: map[scoreKey][]float64{}, late90: map[scoreKey][]float64{}, factors: map[scoreKey]groupFactor{}}
	if e.o.NoCalibration {
		return c
	}
	for _, f := range e.first {
		keys := scoreKeys(f.priority, f.w50)
		if s := e.ratio(now.Sub(f.at), f.w50); s > 1 {
			for _, k := range keys {
				c.late[k] = append(c.late[k], s)
			}
		}
		if s := e.ratio(max(now.Sub(f.at), f.projected), f.w50); s > 1 {
			for _, k := range keys {
				c.late90[k] = append(c.late90[k], s)
			}
		}
	}
	for _, m := range []map[scoreKey][]float64{c.late, c.late90} {
		for k := range m {
			slices.Sort(m[k]) // map order must not matter
		}
	}
	return c
}

func (c *calibration) factor(k scoreKey) (groupFactor, bool) {
	if f, ok := c.factors[k]; ok {
		return f, f.ok
	}
	var f groupFactor
	var scores []float64
	if r := c.e.scores[k]; r != nil {
		scores = r.v
	}
	// The P90 may lean on the jobs known to be late before MinScores have
	// started (early on, those are what there is); the P50 may not.
	with := func(late []float64) []float64 {
		all := make([]float64, 0, len(scores)+len(late))
		all = append(append(all, scores...), late...)
		slices.Sort(all)
		return all
	}
	if len(scores)+len(c.late[k]) >= c.e.o.MinScores {
		f = groupFactor{f50: 1, f90: conformal(with(c.late90[k]), 0.9), ok: true}
		if len(scores) >= c.e.o.MinScores {
			f.f50, f.ok50 = conformal(with(c.late[k]), 0.5), true
		}
	}
	c.factors[k] = f
	return f, f.ok
}

// conformal is the ⌈q(n+1)⌉-th smallest of sorted: the split-conformal
// quantile, which covers q of new cases drawn like these (the levels'
// adaptation covers what drifts).
func conformal(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)+1))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// calibrate scales the median simulation's wait by its group's factors
// (its priority and band of predicted wait; its priority; everything —
// the first with enough scores) into the P50 and P90, the P90 also by its
// priority's boost90. A wait past the horizon is a lower bound and only
// grows. Before there are enough scores the P50 stays as simulated, and
// the P90 is at least ColdSpread times the median wait (boosted too).
func (e *Estimator) calibrate(r Estimate, priority int, c *calibration) Estimate {
	if e.o.NoCalibration || r.Bursting {
		return r
	}
	w := r.P50.Sub(r.At)
	k := groupFactor{f50: 1, f90: e.o.ColdSpread}
	found := false
	for _, key := range scoreKeys(priority, w) {
		if f, ok := c.factor(key); ok {
			k, found = f, true
			break
		}
	}
	scale := func(factor float64) time.Duration {
		s := max(time.Duration(float64(w+e.o.Slack)*factor)-e.o.Slack, 0)
		if r.Beyond {
			return max(s, w)
		}
		return s
	}
	w50, w90 := scale(k.f50), scale(k.f90)
	if !found {
		// Nothing to calibrate on yet: the P90 is ColdSpread times the
		// median wait, or the simulation's own when that is later.
		w90 = max(w90, r.P90.Sub(r.At))
	}
	w90 = time.Duration(float64(w90+e.o.Slack)*math.Exp(e.boost90[priority])) - e.o.Slack
	r.P50, r.P90 = r.At.Add(w50), r.At.Add(max(w90, w50))
	if found {
		r.Beyond90 = r.Beyond
	}
	return r
}
