package spotpolicy_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// TestSpotMDPBound asks how far below uniform progress a single-zone
// policy can get on the shared traces if it knows each trace's statistics
// in advance: the cost-minimising policy of a (semi-)Markov model of spot
// availability fitted to the whole trace, solved exactly by backward
// induction. It is an experiment, not a check (docs/benchmarks.md, "Deadline
// jobs on spot", reports what it printed); it runs only when
// GANGWAY_SPOT_MDP=1 is set (about a minute of CPU):
//
//	GANGWAY_SPOT_MDP=1 go test -run TestSpotMDPBound -v ./internal/spotpolicy/
func TestSpotMDPBound(t *testing.T) {
	if os.Getenv("GANGWAY_SPOT_MDP") != "1" {
		t.Skip("an experiment: set GANGWAY_SPOT_MDP=1 to run it")
	}
	job := spotpolicy.Job{Work: 48 * time.Hour, Deadline: 72 * time.Hour, Overhead: 12 * time.Minute}
	models := []struct {
		name  string
		ages  []int // age buckets' lower bounds, in steps
		hours int   // 24: the chances depend on the hour of the day too
	}{
		{"markov", []int{0}, 1},
		{"semi-markov", []int{0, 1, 2, 3, 5, 9, 17, 33, 65, 129, 257}, 1},
		{"markov by hour of day", []int{0}, 24},
	}
	for _, set := range []string{"availability/1-node/aws-02-15-2023", "preemption/1-node/aws-04-22-2023"} {
		files, err := filepath.Glob(filepath.Join(sharedTraces, set, "*.json"))
		if err != nil || len(files) == 0 {
			t.Skipf("no shared traces in %s", set)
		}
		var od, up, gw float64
		mdp := make([]float64, len(models))
		for _, f := range files {
			tr, err := spotpolicy.LoadTrace(f)
			if err != nil {
				t.Fatal(err)
			}
			odPrice, ok := tr.OnDemandFor()
			if !ok {
				t.Fatalf("%s: no on-demand price for its instance type", tr.Name)
			}
			s := &spotpolicy.Sim{Trace: tr, Job: job, OnDemandPrice: odPrice, SpotFraction: 0.3}
			starts, err := s.Starts(300, 1)
			if err != nil {
				t.Fatal(err)
			}
			// Steps of about 390 s: two of the availability traces' ticks,
			// twelve of the preemption traces'.
			k := max(1, int(math.Round(float64(390*time.Second)/float64(tr.Gap))))
			spot := odPrice * 0.3
			if p, ok := tr.MeanPrice(); ok {
				spot = p
			}
			// One solution per model, or per hour of the day a job starts
			// in where the chances depend on it.
			pols := make([]map[int]*mdpPolicy, len(models))
			fits := make([]*availability, len(models))
			age := runAges(tr)
			for i, m := range models {
				pols[i], fits[i] = map[int]*mdpPolicy{}, fitAvailability(tr, age, k, m.ages, m.hours)
			}
			for _, st := range starts {
				od += s.Simulate(spotpolicy.OnDemandOnly{}, st).Cost
				up += s.Simulate(spotpolicy.UniformProgress{}, st).Cost
				gw += s.Simulate(spotpolicy.DefaultGangway(), st).Cost
				for i := range models {
					h := fits[i].hourOf(st)
					p, ok := pols[i][h]
					if !ok {
						p = solveMDP(job, time.Duration(k)*tr.Gap, fits[i], spot, odPrice, st)
						pols[i][h] = p
					}
					p.start = st
					r := s.Simulate(p, st)
					if !r.MetDeadline {
						t.Errorf("%s, %s, start %d: deadline missed", tr.Name, models[i].name, st)
					}
					mdp[i] += r.Cost
				}
			}
		}
		fmt.Printf("%s (%d traces × 300 jobs): uniform-progress %.3f, gangway %.3f (%.3f × uniform progress)",
			set, len(files), up/od, gw/od, gw/up)
		for i, m := range models {
			fmt.Printf(", %s MDP %.3f (%.3f ×)", m.name, mdp[i]/od, mdp[i]/up)
		}
		fmt.Println()
	}
}

// availability is a semi-Markov model of spot over steps of k ticks:
// stay[h][a][b] is the chance that availability a (0 gone, 1 there) whose
// run has lasted an age in bucket b (ages[b] steps or more) is the same
// one step later, in hour h of the day (of hours; 1: any hour), counted
// from the trace's start.
type availability struct {
	ages  []int
	hours int
	gap   time.Duration
	k     int
	stay  [][2][]float64
	age   []int // per tick of the fitted trace, the age of its run (runAges)
}

// hourOf is the hour bucket of the trace's tick i.
func (m *availability) hourOf(i int) int {
	return int(time.Duration(i)*m.gap/time.Hour) % m.hours
}

func (m *availability) bucket(age int) int {
	b := 0
	for b+1 < len(m.ages) && age >= m.ages[b+1] {
		b++
	}
	return b
}

// runAges is, per tick, how many ticks the trace's availability has been
// what it is.
func runAges(tr *spotpolicy.Trace) []int {
	age := make([]int, len(tr.Available))
	for i := 1; i < len(age); i++ {
		if (tr.Available[i] > 0) == (tr.Available[i-1] > 0) {
			age[i] = age[i-1] + 1
		}
	}
	return age
}

// fitAvailability counts, over the whole trace (age: its runAges), how
// often availability is the same k ticks later, per hour bucket, state and
// age bucket (Laplace-smoothed).
func fitAvailability(tr *spotpolicy.Trace, age []int, k int, ages []int, hours int) *availability {
	m := &availability{ages: ages, hours: hours, gap: tr.Gap, k: k, age: age}
	n, same := make([][2][]float64, hours), make([][2][]float64, hours)
	m.stay = make([][2][]float64, hours)
	for h := range hours {
		for a := range 2 {
			n[h][a], same[h][a], m.stay[h][a] = make([]float64, len(ages)), make([]float64, len(ages)), make([]float64, len(ages))
		}
	}
	for i := 0; i+k < len(tr.Available); i++ {
		h, a, b := m.hourOf(i), up(tr.Available[i]), m.bucket(age[i]/k)
		n[h][a][b]++
		if up(tr.Available[i+k]) == a {
			same[h][a][b]++
		}
	}
	for h := range hours {
		for a := range 2 {
			for b := range ages {
				m.stay[h][a][b] = (same[h][a][b] + 1) / (n[h][a][b] + 2)
			}
		}
	}
	return m
}

func up(available int) int {
	if available > 0 {
		return 1
	}
	return 0
}

// mdpPolicy is the optimal policy of an availability model: act holds the
// best choice per (steps left, work steps left, instance, availability,
// age bucket). The instance is 0 for none, 1+o for spot and 1+dt+o for
// on-demand with o changeover steps still to pay.
type mdpPolicy struct {
	step      time.Duration
	dt, T, W  int
	instances int
	model     *availability
	act       []int8

	// start is the tick the job started at: the decision's tick reads the
	// age of the availability run then from the model's trace.
	start int
}

func (p *mdpPolicy) Name() string { return "mdp" }

func (p *mdpPolicy) idx(tl, wl, m, a, b int) int {
	return (((tl*(p.W+1)+wl)*p.instances+m)*2+a)*len(p.model.ages) + b
}

// solveMDP minimises the expected cost to finish the job by its deadline
// (missing it costs 1e12) under the model, spot and on-demand at the given
// prices per hour, for a job starting at the trace's tick start (which
// sets the hours of its steps).
func solveMDP(job spotpolicy.Job, step time.Duration, model *availability, spotPrice, odPrice float64, start int) *mdpPolicy {
	nb := len(model.ages)
	dt := max(int((job.Overhead+step-1)/step), 1)
	p := &mdpPolicy{step: step, dt: dt, T: int(job.Deadline / step), W: int((job.Work + step - 1) / step),
		instances: 2*dt + 1, model: model}
	M := p.instances
	p.act = make([]int8, (p.T+1)*(p.W+1)*M*2*nb)
	ps, po := spotPrice*step.Hours(), odPrice*step.Hours()
	n := (p.W + 1) * M * 2 * nb
	prev, cur := make([]float64, n), make([]float64, n)
	vi := func(wl, m, a, b int) int { return ((wl*M+m)*2+a)*nb + b }
	for i := vi(1, 0, 0, 0); i < n; i++ {
		prev[i] = 1e12 // no time left, work left
	}
	isSpot := func(m int) bool { return m >= 1 && m <= dt }
	// A run in bucket b moves to the next one with 1 ÷ the bucket's width
	// (its ages taken as equally likely).
	adv := make([]float64, nb)
	for b := range nb - 1 {
		adv[b] = 1 / float64(model.ages[b+1]-model.ages[b])
	}
	// expected is the value one step on of holding instance m with wl
	// work left, availability a of age bucket b now.
	var hour int // of the step being decided
	expected := func(wl, m, a, b int) float64 {
		stay := model.stay[hour][a][b]
		gone := m
		if a == 1 && isSpot(gone) {
			gone = 0 // spot goes: preempted
		}
		e := (1 - stay) * prev[vi(wl, gone, 1-a, 0)]
		kept := m
		if a == 0 && isSpot(kept) {
			kept = 0
		}
		if b+1 < nb {
			return e + stay*(adv[b]*prev[vi(wl, kept, a, b+1)]+(1-adv[b])*prev[vi(wl, kept, a, b)])
		}
		return e + stay*prev[vi(wl, kept, a, b)]
	}
	// run is the state after a step on instance kind (first index of its
	// instances) from m: a new one pays its changeover first.
	run := func(wl, m, kind int) (int, int) {
		switch {
		case m < kind || m >= kind+dt:
			return wl, kind + dt - 1
		case m > kind:
			return wl, m - 1
		}
		return wl - 1, m
	}
	for tl := 1; tl <= p.T; tl++ {
		hour = model.hourOf(start + (p.T-tl)*model.k)
		for wl := 1; wl <= p.W; wl++ {
			for m := range M {
				for a := range 2 {
					for b := range nb {
						held := m
						if a == 0 && isSpot(held) {
							held = 0 // preempted
						}
						best, choice := expected(wl, 0, a, b), spotpolicy.Wait
						if a == 1 {
							w, m2 := run(wl, held, 1)
							if v := ps + expected(w, m2, a, b); v < best {
								best, choice = v, spotpolicy.Spot
							}
						}
						w, m2 := run(wl, held, 1+dt)
						if v := po + expected(w, m2, a, b); v < best {
							best, choice = v, spotpolicy.OnDemand
						}
						cur[vi(wl, m, a, b)] = best
						p.act[p.idx(tl, wl, m, a, b)] = int8(choice)
					}
				}
			}
		}
		prev, cur = cur, prev
	}
	return p
}

func (p *mdpPolicy) Decide(s spotpolicy.State) spotpolicy.Choice {
	tl := min(int((s.Deadline-s.Now)/p.step), p.T)
	if tl <= 0 {
		return spotpolicy.OnDemand
	}
	wl := min(int((s.WorkLeft+p.step-1)/p.step), p.W)
	o := min(int((s.OverheadLeft+p.step-1)/p.step), p.dt-1)
	m := 0
	switch s.Running {
	case spotpolicy.Spot:
		m = 1 + o
	case spotpolicy.OnDemand:
		m = 1 + p.dt + o
	}
	a := 0
	if s.SpotAvailable {
		a = 1
	}
	tick := p.start + int(s.Now/p.model.gap)
	b := p.model.bucket(p.model.age[tick] / p.model.k)
	if c := spotpolicy.Choice(p.act[p.idx(tl, wl, m, a, b)]); s.Safe(c) {
		return c
	}
	return spotpolicy.OnDemand
}
