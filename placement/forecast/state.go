package forecast

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
)

// State is what an Estimator has learned, in a form that can be stored
// and handed to another Estimator (a new dispatch leader's): the runtime
// model's histograms when the model is a History, the calibration's
// scores, the P90's tracking factors, and the waiting jobs' first
// estimates, which each job scores when it starts. The latest estimates
// are not in it: the next forecast makes them again.
type State struct {
	Runtimes []GroupState    `json:"runtimes,omitempty"`
	Scores   []ScoreState    `json:"scores,omitempty"`
	Boost90  map[int]float64 `json:"boost90,omitempty"`
	First    []FirstState    `json:"first,omitempty"`
}

// FirstState is a waiting job's first estimate (of its attempt), made at
// At: the median simulation's wait, uncalibrated (Wait50), the P90 wait
// shown (Shown90), whether that P90 was judged, and the wait to the start
// the latest simulation gave (Projected).
type FirstState struct {
	JobID     gangway.JobID `json:"job"`
	Attempt   int           `json:"attempt"`
	Priority  int           `json:"priority"`
	At        time.Time     `json:"at"`
	Wait50    time.Duration `json:"wait50"`
	Shown90   time.Duration `json:"shown90"`
	Judged    bool          `json:"judged,omitempty"`
	Projected time.Duration `json:"projected"`
}

// GroupState is one group's histogram of actual ÷ requested runtime
// (History): whether the runs it learned from declared an estimated
// runtime (Estimate) or only a limit, its level (0 everyone, 1 team, 2
// project, 3 name prefix), its key, its weight in runs and its nonzero
// bins. Groups come least recently updated first. A state stored before
// the two bases were kept apart reads as limits only.
type GroupState struct {
	Estimate bool            `json:"estimate,omitempty"`
	Level    int             `json:"level"`
	Key      string          `json:"key"`
	N        float64         `json:"n"`
	Bins     map[int]float64 `json:"bins"`
}

// ScoreState is one calibration group's scores (real ÷ simulated wait),
// oldest first: Priority is the group's (math.MinInt for every
// priority), Band its band of predicted wait (-1 for every band).
type ScoreState struct {
	Priority int       `json:"priority"`
	Band     int       `json:"band"`
	Ratios   []float64 `json:"ratios"`
}

// State is what e has learned so far.
func (e *Estimator) State() State {
	var s State
	if h, ok := e.rt.(*History); ok {
		s.Runtimes = h.state()
	}
	for k, r := range e.scores {
		s.Scores = append(s.Scores, ScoreState{Priority: k.priority, Band: k.band, Ratios: r.ordered()})
	}
	slices.SortFunc(s.Scores, func(a, b ScoreState) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Band, b.Band))
	})
	if len(e.boost90) > 0 {
		s.Boost90 = maps.Clone(e.boost90)
	}
	for id, f := range e.first {
		s.First = append(s.First, FirstState{JobID: id, Attempt: f.attempt, Priority: f.priority, At: f.at,
			Wait50: f.w50, Shown90: f.shown90, Judged: f.judged, Projected: f.projected})
	}
	slices.SortFunc(s.First, func(a, b FirstState) int {
		return cmp.Or(a.At.Compare(b.At), compareIDs(a.JobID, b.JobID))
	})
	return s
}

// Learned counts what e has learned: runs observed ending, first
// estimates made and scored, and P90s judged. It changes whenever State
// would, but for a waiting job's projected start, which every forecast
// makes again.
func (e *Estimator) Learned() int64 { return e.learned }

// Restore adds s to what e has learned: an Estimator that has learned
// nothing yet goes on as the one s was taken from would. A runtime model
// that is not a History ignores s.Runtimes. It fails, changing nothing,
// on a state no Estimator could have made.
func (e *Estimator) Restore(s State) error {
	for _, g := range s.Runtimes {
		if g.Level < 0 || g.Level >= nLevels {
			return fmt.Errorf("restore estimator: runtime group %q: level %d is not 0–%d", g.Key, g.Level, nLevels-1)
		}
		for b := range g.Bins {
			if b < 0 || b >= nBins {
				return fmt.Errorf("restore estimator: runtime group %q: bin %d is not 0–%d", g.Key, b, nBins-1)
			}
		}
	}
	for _, sc := range s.Scores {
		if sc.Band != allBands && (sc.Band < 0 || sc.Band >= nBands) {
			return fmt.Errorf("restore estimator: scores of priority %d: band %d is not -1 or 0–%d", sc.Priority, sc.Band, nBands-1)
		}
	}
	for _, f := range s.First {
		if f.JobID == "" || f.At.IsZero() {
			return fmt.Errorf("restore estimator: a first estimate names no job or no time (job %q, at %s)", f.JobID, f.At)
		}
	}
	if h, ok := e.rt.(*History); ok {
		h.restore(s.Runtimes)
	}
	for _, sc := range s.Scores {
		key := scoreKey{priority: sc.Priority, band: sc.Band}
		k := 0 // as scoreKeys orders them: the finest group first
		switch {
		case key.priority == anyPriority:
			k = 2
		case key.band == allBands:
			k = 1
		}
		r := e.scoreRing(key)
		if r == nil {
			continue
		}
		for _, x := range sc.Ratios {
			r.add(x, e.window(k))
		}
	}
	for p, b := range s.Boost90 {
		if _, ok := e.boost90[p]; ok || len(e.boost90) < maxScoreKeys {
			e.boost90[p] = min(max(b, -maxBoost), maxBoost)
		}
	}
	// A first estimate made before one e made of the same attempt is the
	// one the job was shown at submit; jobs that no longer wait drop
	// theirs at the next Observe.
	for _, fs := range s.First {
		if f, ok := e.first[fs.JobID]; ok && (f.attempt != fs.Attempt || !fs.At.Before(f.at)) {
			continue
		}
		e.first[fs.JobID] = firstEstimate{attempt: fs.Attempt, priority: fs.Priority, at: fs.At, w50: fs.Wait50,
			shown90: fs.Shown90, judged: fs.Judged, projected: fs.Projected}
	}
	e.learned++
	return nil
}

// ordered is the ring's values, oldest first.
func (r *ring) ordered() []float64 {
	return append(slices.Clone(r.v[r.next:]), r.v[:r.next]...)
}

// state is the History's groups, least recently updated first.
func (h *History) state() []GroupState {
	type used struct {
		g   GroupState
		seq int64
	}
	var all []used
	for basis, levels := range h.groups {
		for l, m := range levels {
			for key, g := range m {
				bins := map[int]float64{}
				for b, c := range g.c {
					if c != 0 {
						bins[b] = c
					}
				}
				gs := GroupState{Estimate: basis == basisEstimate, Level: l, Key: key, N: g.n, Bins: bins}
				all = append(all, used{gs, g.used})
			}
		}
	}
	slices.SortFunc(all, func(a, b used) int {
		// One run updates groups of one basis, all with the same seq.
		return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.g.Level, b.g.Level), cmp.Compare(a.g.Key, b.g.Key))
	})
	out := make([]GroupState, len(all))
	for i, u := range all {
		out[i] = u.g
	}
	return out
}

// restore adds groups (as state lists them) to the History: meant for an
// empty one, whose least recently updated groups they then are as they
// were.
func (h *History) restore(groups []GroupState) {
	for _, gs := range groups {
		basis := basisLimit
		if gs.Estimate {
			basis = basisEstimate
		}
		g := h.group(basis, gs.Level, gs.Key)
		g.n += gs.N
		for b, c := range gs.Bins {
			g.c[b] += c
		}
		h.seq++
		g.used = h.seq
	}
}
