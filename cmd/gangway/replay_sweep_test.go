package main

import (
	"strings"
	"testing"
)

func TestReplaySweepBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--points", "colour=0.2"}, `--points: sweep "colour=0.2": unknown knob "colour"`},
		{[]string{"--points", "spec=1.5"}, "--points"},
		{[]string{"--seeds", "x"}, "--seeds"},
		{[]string{"--every-node", "0"}, "--every-node: 0: want 1 or more"},
		{[]string{"--check", "-1"}, "--check"},
		{[]string{"--policies", "nope"}, "--policies"},
		{[]string{"--tasks", "/nonexistent.csv"}, "--tasks"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := runGangway(t, append([]string{"replay", "sweep"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestReplaySweepSmall(t *testing.T) {
	out, err := runGangway(t, "replay", "sweep", "--points", "spec=0.2", "--seeds", "42",
		"--policies", "gangway,fgd", "--every-node", "16", "--markdown")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range []string{"| spec=20% |", "gangway/fgd", "seeds worse"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}
