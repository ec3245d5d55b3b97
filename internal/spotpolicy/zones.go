package spotpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ZoneView is one zone's spot market now, as a policy sees it.
type ZoneView struct {
	// Available: the zone has spot enough for the job for the next tick.
	Available bool
	// UpFor is how long the zone has had spot enough, without a break, up
	// to now (0 when it has none): what has been seen, not the future.
	UpFor time.Duration
	Price float64 // spot, per instance-hour, now
}

// ZoneState is what a multi-zone policy knows when it decides: State for
// the zone the job is in (Zone: its instance's, or the last one's; -1
// before it has held any) and every zone's spot market now.
type ZoneState struct {
	State
	Zone  int
	Zones []ZoneView
	// Move is the changeover delay a new instance costs, over Overhead,
	// when it is in another zone than Zone: the checkpoint has to follow.
	Move time.Duration
}

// ZonePolicy decides, tick by tick, what a job with a deadline runs on
// and in which zone (the zone matters for Spot only: on-demand runs where
// the job is). Like Policy, it keeps no state between calls.
type ZonePolicy interface {
	Name() string
	DecideZone(ZoneState) (Choice, int)
}

// OneZone runs a single-zone Policy in a one-zone ZoneSim.
type OneZone struct{ Policy Policy }

func (o OneZone) Name() string { return o.Policy.Name() }

func (o OneZone) DecideZone(s ZoneState) (Choice, int) {
	st := s.State
	st.SpotAvailable, st.SpotPrice = s.Zones[0].Available, s.Zones[0].Price
	return decide(o.Policy, st), 0
}

// Multi-zone policy names.
const (
	NameRoundRobin = "uniform-progress-rr"
	NameMultiZone  = "gangway-multizone"
)

// ZoneNames lists every multi-zone policy ZoneByName knows.
func ZoneNames() []string { return []string{NameRoundRobin, NameMultiZone} }

// ZoneByName returns the named multi-zone policy.
func ZoneByName(name string) (ZonePolicy, error) {
	switch name {
	case NameRoundRobin:
		return RoundRobin(), nil
	case NameMultiZone:
		return MultiZone(), nil
	}
	return nil, fmt.Errorf("unknown multi-zone spot policy %q (valid: %s)", name, strings.Join(ZoneNames(), ", "))
}

// ZonesByNames returns the multi-zone policies names lists, in order; the
// one name "none" means none.
func ZonesByNames(names []string) ([]ZonePolicy, error) {
	if len(names) == 1 && names[0] == "none" {
		return nil, nil
	}
	out := make([]ZonePolicy, 0, len(names))
	for _, name := range names {
		p, err := ZoneByName(name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(q ZonePolicy) bool { return q.Name() == name }) {
			return nil, fmt.Errorf("%q given twice", name)
		}
		out = append(out, p)
	}
	return out, nil
}

// ZoneFollow runs a single-zone Policy across zones: each tick it picks
// the zone where the job would take spot next (Pick) and asks the policy
// as if that zone were the only one, its changeover lengthened by the
// move when the zone is not the job's. So the safety net, the pacing and
// the exploitation rule are the single-zone policy's own; what the zones
// add is only more places spot may be.
type ZoneFollow struct {
	Label  string
	Policy Policy
	// Pick is the zone to take spot in next.
	Pick func(ZoneState) int
}

func (z ZoneFollow) Name() string { return z.Label }

func (z ZoneFollow) DecideZone(s ZoneState) (Choice, int) {
	if s.Running == Spot && s.Zone >= 0 && s.Zones[s.Zone].Available {
		s.State.SpotAvailable, s.State.SpotPrice = true, s.Zones[s.Zone].Price
		return decide(z.Policy, s.State), s.Zone
	}
	cand := z.Pick(s)
	st := s.State
	st.SpotAvailable, st.SpotPrice = false, 0
	if cand >= 0 {
		st.SpotAvailable, st.SpotPrice = s.Zones[cand].Available, s.Zones[cand].Price
		if s.Zone >= 0 && cand != s.Zone {
			st.Overhead += s.Move
		}
	}
	c := decide(z.Policy, st)
	if c == Spot {
		return Spot, cand
	}
	return c, s.Zone
}

// RoundRobin is the multi-region baseline of the literature: Uniform
// Progress, and after a preemption the next zone in a fixed order that
// has spot.
func RoundRobin() ZoneFollow {
	return ZoneFollow{Label: NameRoundRobin, Policy: UniformProgress{}, Pick: nextZone}
}

// MultiZone is Gangway's multi-zone policy: Gangway's single-zone policy,
// staying in the job's zone while it has spot (a move costs a changeover
// and a checkpoint transfer), else taking the cheapest zone that has spot
// now, the one whose spot has lasted longest so far among equals (spot
// that has held for long tends to go on holding: AWS outages and runs are
// heavy-tailed, so the age of a run is the best online sign of its rest).
func MultiZone() ZoneFollow {
	return ZoneFollow{Label: NameMultiZone, Policy: DefaultGangway(), Pick: cheapestLasting}
}

// nextZone is the job's zone when it has spot, else the first zone after
// it, in order, that has (the job's zone when none has).
func nextZone(s ZoneState) int {
	if s.Zone >= 0 && s.Zones[s.Zone].Available {
		return s.Zone
	}
	n := len(s.Zones)
	for i := 1; i <= n; i++ {
		if z := (s.Zone + i) % n; s.Zones[z].Available {
			return z
		}
	}
	return s.Zone
}

// cheapestLasting is the job's zone when it has spot, else the zone with
// spot at the lowest price, the longest up among equal prices.
func cheapestLasting(s ZoneState) int {
	if s.Zone >= 0 && s.Zones[s.Zone].Available {
		return s.Zone
	}
	best := -1
	for z, v := range s.Zones {
		if !v.Available {
			continue
		}
		if best < 0 || v.Price < s.Zones[best].Price || v.Price == s.Zones[best].Price && v.UpFor > s.Zones[best].UpFor {
			best = z
		}
	}
	if best < 0 {
		return s.Zone
	}
	return best
}

// ZoneSim replays deadline jobs over a set of zones' traces of one
// instance type: the same ticks (Validate checks the tick lengths match;
// the replay runs over the shortest trace's ticks).
type ZoneSim struct {
	Zones []*Trace
	Job   Job
	// Move is the changeover delay a new instance in another zone than
	// the job's last costs over Job.Overhead (moving the checkpoint).
	Move time.Duration
	// OnDemandPrice is per instance-hour; SpotFraction prices spot at
	// that share of it in zones whose trace has no prices.
	OnDemandPrice float64
	SpotFraction  float64
}

// Validate checks the zones, the job and the prices.
func (z *ZoneSim) Validate() error {
	if len(z.Zones) == 0 {
		return errors.New("no spot traces for the zones")
	}
	for _, tr := range z.Zones {
		s := Sim{Trace: tr, Job: z.Job, OnDemandPrice: z.OnDemandPrice, SpotFraction: z.SpotFraction}
		if err := s.Validate(); err != nil {
			return err
		}
		if tr.Gap != z.Zones[0].Gap {
			return fmt.Errorf("spot traces %s and %s: ticks of %v and %v; the zones of a set must share a tick length", z.Zones[0].Name, tr.Name, z.Zones[0].Gap, tr.Gap)
		}
	}
	if z.Move < 0 {
		return fmt.Errorf("zone move delay %v: want 0 or more", z.Move)
	}
	return nil
}

// Ticks is the ticks every zone's trace has.
func (z *ZoneSim) Ticks() int {
	n := len(z.Zones[0].Available)
	for _, tr := range z.Zones[1:] {
		n = min(n, len(tr.Available))
	}
	return n
}

// Starts draws n start ticks, as Sim.Starts does, over the ticks every
// zone has; name seeds the stream with seed.
func (z *ZoneSim) Starts(name string, n int, seed uint64) ([]int, error) {
	return drawStarts(name, z.Ticks(), z.Zones[0].Gap, z.Job.Deadline, n, seed)
}

// Simulate replays the job from tick start under p, as Sim.Simulate does
// for one zone: at each tick a spot instance whose zone has fewer than the
// job's instances available is preempted, then p picks what to run and
// where; a new instance pays the changeover overhead (plus Move when it
// is in another zone than the job's last instance) before it makes
// progress; every tick is charged at its zone's price, per instance. Ticks
// past the end wrap to the start. ZoneSim must be valid (Validate).
func (z *ZoneSim) Simulate(p ZonePolicy, start int) Run {
	job, gap, ticks := z.Job, z.Zones[0].Gap, z.Ticks()
	k := job.Size()
	wrap := func(i int) int { return ((i % ticks) + ticks) % ticks }
	views := make([]ZoneView, len(z.Zones))
	// Seen before the start: how long each zone has been up, looking
	// back at most one trace length.
	for zi, tr := range z.Zones {
		for back := 1; back < ticks && tr.Available[wrap(start-back)] >= k; back++ {
			views[zi].UpFor += gap
		}
	}

	run := Run{Start: time.Duration(start) * gap}
	left := job.Work
	running, zone, overheadLeft := Wait, -1, time.Duration(0)
	horizon := job.Deadline + job.Work + 2*job.Overhead
	for i := 0; ; i++ {
		now := time.Duration(i) * gap
		if now >= horizon {
			run.FinishedAt = horizon
			return run
		}
		t := wrap(start + i)
		for zi, tr := range z.Zones {
			v := &views[zi]
			v.Available = tr.Available[t] >= k
			if v.Available {
				v.UpFor += gap
			} else {
				v.UpFor = 0
			}
			v.Price = z.OnDemandPrice * z.SpotFraction
			if tr.Prices != nil {
				v.Price = tr.Prices[t]
			}
		}
		if running == Spot && !views[zone].Available {
			running, overheadLeft = Wait, 0
			run.Preemptions++
		}
		st := State{Now: now, Deadline: job.Deadline, Work: job.Work, WorkLeft: left, Running: running,
			Overhead: job.Overhead, OverheadLeft: overheadLeft, Tick: gap, OnDemandPrice: z.OnDemandPrice}
		if zone >= 0 {
			st.SpotAvailable, st.SpotPrice = views[zone].Available, views[zone].Price
		}
		c, to := p.DecideZone(ZoneState{State: st, Zone: zone, Zones: views, Move: z.Move})
		switch {
		case c < Wait || c > OnDemand:
			c = Wait
		case c == Spot && (to < 0 || to >= len(views) || !views[to].Available):
			c = Wait // a policy cannot run on spot that is not there
		case c != Spot:
			to = zone
		}
		if c != running || c == Spot && to != zone {
			running, overheadLeft = c, 0
			if c != Wait {
				overheadLeft = job.Overhead
				if zone >= 0 && to != zone {
					overheadLeft += z.Move
					run.Moves++
				}
				if zone < 0 && to < 0 {
					to = 0 // the first instance is on-demand: it starts in the first zone
				}
				zone = to
				run.Changeovers++
			}
		}
		switch running {
		case Wait:
			continue
		case Spot:
			run.Cost += views[zone].Price * float64(k) * gap.Hours()
			run.SpotTime += gap
		case OnDemand:
			run.Cost += z.OnDemandPrice * float64(k) * gap.Hours()
			run.OnDemandTime += gap
		}
		paid := min(overheadLeft, gap)
		overheadLeft -= paid
		progress := gap - paid
		if progress >= left {
			run.Finished = true
			run.FinishedAt = now + paid + left
			run.MetDeadline = run.FinishedAt <= job.Deadline
			return run
		}
		left -= progress
	}
}
