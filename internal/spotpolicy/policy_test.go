package spotpolicy_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

const (
	spot     = spotpolicy.Spot
	onDemand = spotpolicy.OnDemand
	wait     = spotpolicy.Wait
)

// state is a 48h job due at 72h with 12-minute changeovers and 3-minute
// ticks, at hour now with done hours of work done.
func state(now, done float64, running spotpolicy.Choice, spotUp bool) spotpolicy.State {
	h := func(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Hour))) }
	return spotpolicy.State{Now: h(now), Deadline: 72 * time.Hour, Work: 48 * time.Hour, WorkLeft: 48*time.Hour - h(done),
		SpotAvailable: spotUp, Running: running, Overhead: 12 * time.Minute, Tick: 3 * time.Minute,
		SpotPrice: 0.918, OnDemandPrice: 3.06}
}

func TestSafe(t *testing.T) {
	// At hour 30 the line is at 20h of work; slack = 72 - 30 - (48 - done).
	tests := map[string]struct {
		s    spotpolicy.State
		want map[spotpolicy.Choice]bool
	}{
		"plenty of slack: anything goes": {
			s:    state(30, 20, wait, true),
			want: map[spotpolicy.Choice]bool{spot: true, onDemand: true, wait: true},
		},
		"no spot to start": {
			s:    state(30, 20, wait, false),
			want: map[spotpolicy.Choice]bool{spot: false, onDemand: true, wait: true},
		},
		"slack for exactly two changeovers: spot yes, waiting a tick no": {
			s:    state(30, 6.4, wait, true), // slack 0.4h
			want: map[spotpolicy.Choice]bool{spot: true, onDemand: true, wait: false},
		},
		"slack for two changeovers and a tick: waiting is still safe": {
			s:    state(30, 6.45, wait, true), // slack 0.45h
			want: map[spotpolicy.Choice]bool{spot: true, onDemand: true, wait: true},
		},
		"less than two changeovers: on-demand only": {
			s:    state(30, 6.3, onDemand, true), // slack 0.3h
			want: map[spotpolicy.Choice]bool{spot: false, onDemand: true, wait: false},
		},
		"keeping a spot instance is safe on any slack": {
			s:    state(30, 6.3, spot, true),
			want: map[spotpolicy.Choice]bool{spot: true, onDemand: true, wait: false},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := map[spotpolicy.Choice]bool{}
			for _, c := range []spotpolicy.Choice{spot, onDemand, wait} {
				got[c] = tc.s.Safe(c)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Safe (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	// At hour 30 the uniform-progress line is at 20h of work, at 30.4h
	// (2 changeovers later) at 20.267h, at 29.6h at 19.733h.
	tests := map[string]struct {
		s                                    spotpolicy.State
		wantGreedy, wantUniform, wantGangway spotpolicy.Choice
	}{
		"idle, spot there": {
			s:          state(30, 20, wait, true),
			wantGreedy: spot, wantUniform: spot, wantGangway: spot,
		},
		"idle, no spot, ahead of the line": {
			s:          state(30, 21, wait, false),
			wantGreedy: wait, wantUniform: wait, wantGangway: wait,
		},
		"idle, no spot, behind the line": {
			s:          state(30, 19, wait, false),
			wantGreedy: wait, wantUniform: onDemand, wantGangway: onDemand,
		},
		"on spot: stay": {
			s:          state(30, 10, spot, true),
			wantGreedy: spot, wantUniform: spot, wantGangway: spot,
		},
		"on-demand, spot back, on the line: hysteresis keeps uniform progress on on-demand": {
			s:          state(30, 20.1, onDemand, true),
			wantGreedy: onDemand, wantUniform: onDemand, wantGangway: spot,
		},
		"on-demand, spot back, 2d ahead of the line": {
			s:          state(30, 20.3, onDemand, true),
			wantGreedy: onDemand, wantUniform: spot, wantGangway: spot,
		},
		"on-demand, spot back, less than 2d behind the line": {
			s:          state(30, 19.8, onDemand, true),
			wantGreedy: onDemand, wantUniform: onDemand, wantGangway: spot,
		},
		"on-demand, spot back, more than 2d behind the line": {
			s:          state(30, 19.7, onDemand, true),
			wantGreedy: onDemand, wantUniform: onDemand, wantGangway: onDemand,
		},
		"on-demand, no spot, well ahead: uniform progress idles, gangway keeps the instance": {
			s:          state(30, 21, onDemand, false),
			wantGreedy: onDemand, wantUniform: wait, wantGangway: onDemand,
		},
		"idle, spot there, slack below two changeovers: safety net": {
			s:          state(30, 6.3, wait, true),
			wantGreedy: onDemand, wantUniform: onDemand, wantGangway: onDemand,
		},
		"idle, no spot, waiting a tick would break the safety net": {
			s:          state(60, 36.42, wait, false), // slack 0.42h, 0.37h after a tick
			wantGreedy: onDemand, wantUniform: onDemand, wantGangway: onDemand,
		},
		"idle, no spot, far ahead but out of slack": {
			s:          state(71.5, 47.2, wait, false), // slack 0.2h, line at 47.67h
			wantGreedy: onDemand, wantUniform: onDemand, wantGangway: onDemand,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := map[string]spotpolicy.Choice{}
			for _, p := range []spotpolicy.Policy{spotpolicy.Greedy{}, spotpolicy.UniformProgress{}, spotpolicy.DefaultGangway(), spotpolicy.OnDemandOnly{}} {
				got[p.Name()] = p.Decide(tc.s)
			}
			want := map[string]spotpolicy.Choice{
				spotpolicy.NameGreedy: tc.wantGreedy, spotpolicy.NameUniformProgress: tc.wantUniform,
				spotpolicy.NameGangway: tc.wantGangway, spotpolicy.NameOnDemand: onDemand,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestByName(t *testing.T) {
	for _, name := range spotpolicy.Names() {
		p, err := spotpolicy.ByName(name)
		if err != nil {
			t.Fatalf("ByName(%q): %v", name, err)
		}
		if p.Name() != name {
			t.Errorf("ByName(%q).Name() = %q", name, p.Name())
		}
	}
	_, err := spotpolicy.ByName("optimal")
	if want := `unknown spot policy "optimal" (valid: on-demand, greedy, uniform-progress, gangway)`; err == nil || err.Error() != want {
		t.Errorf("ByName(optimal) error = %v, want %q", err, want)
	}
}

func TestChoiceString(t *testing.T) {
	got := []string{wait.String(), spot.String(), onDemand.String(), spotpolicy.Choice(7).String()}
	if diff := cmp.Diff([]string{"wait", "spot", "on-demand", "Choice(7)"}, got); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
}

func TestByNames(t *testing.T) {
	tests := map[string]struct {
		names   []string
		want    []string
		wantErr string
	}{
		"in order":    {names: []string{spotpolicy.NameGangway, spotpolicy.NameGreedy}, want: []string{spotpolicy.NameGangway, spotpolicy.NameGreedy}},
		"unknown":     {names: []string{"optimal"}, wantErr: `unknown spot policy "optimal"`},
		"given twice": {names: []string{spotpolicy.NameGangway, spotpolicy.NameGangway}, wantErr: `"gangway" given twice`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ps, err := spotpolicy.ByNames(tc.names)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ByNames error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Name())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRentNow: the server's burst decision is the replay's policy asked
// for a job that holds nothing, before it knows whether spot has capacity.
func TestRentNow(t *testing.T) {
	base := spotpolicy.State{Deadline: 10 * time.Hour, Work: 4 * time.Hour, WorkLeft: 4 * time.Hour, Overhead: 6 * time.Minute}
	at := func(now time.Duration, left time.Duration) spotpolicy.State {
		s := base
		s.Now, s.WorkLeft = now, left
		return s
	}
	tests := map[string]struct {
		state spotpolicy.State
		want  spotpolicy.Rent
	}{
		"just submitted, slack to spare: spot, else wait":       {at(0, 4*time.Hour), spotpolicy.Rent{Spot: true}},
		"behind the line: spot, else on-demand":                 {at(2*time.Hour, 4*time.Hour), spotpolicy.Rent{Spot: true, OnDemand: true}},
		"ahead of the line: spot, else wait":                    {at(2*time.Hour, time.Hour), spotpolicy.Rent{Spot: true}},
		"slack for less than two changeovers: on-demand only":   {at(6*time.Hour-10*time.Minute, 4*time.Hour), spotpolicy.Rent{OnDemand: true}},
		"past the deadline's reach: on-demand, the best it has": {at(7*time.Hour, 4*time.Hour), spotpolicy.Rent{OnDemand: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := spotpolicy.RentNow(spotpolicy.BurstPolicy(), tc.state); got != tc.want {
				t.Errorf("RentNow = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRentNowIsDecide: for every state of a job that holds nothing, what
// RentNow lets it rent is what the policy's Decide runs it on in the
// replay: spot when spot is there, on-demand when it is not.
func TestRentNowIsDecide(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		work := time.Duration(rapid.IntRange(1, 100).Draw(t, "work h")) * time.Hour
		deadline := work + time.Duration(rapid.IntRange(0, 100*60).Draw(t, "slack m"))*time.Minute
		s := spotpolicy.State{Deadline: deadline, Work: work,
			Now:      time.Duration(rapid.Int64Range(0, int64(deadline)).Draw(t, "now")),
			WorkLeft: time.Duration(rapid.Int64Range(1, int64(work)).Draw(t, "left")),
			Overhead: time.Duration(rapid.IntRange(0, 60).Draw(t, "overhead m")) * time.Minute,
			Tick:     time.Duration(rapid.IntRange(0, 600).Draw(t, "tick s")) * time.Second}
		for _, name := range spotpolicy.Names() {
			p, _ := spotpolicy.ByName(name)
			rent := spotpolicy.RentNow(p, s)
			up, down := s, s
			up.SpotAvailable = true
			if got := p.Decide(up) == spotpolicy.Spot; rent.Spot != got {
				t.Fatalf("%s: RentNow spot %v, Decide with spot there takes spot %v (%+v)", name, rent.Spot, got, s)
			}
			if got := p.Decide(down) == spotpolicy.OnDemand; rent.OnDemand != got {
				t.Fatalf("%s: RentNow on-demand %v, Decide without spot takes on-demand %v (%+v)", name, rent.OnDemand, got, s)
			}
		}
	})
}
