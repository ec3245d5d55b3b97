package main

import (
	"strings"
	"testing"
)

func TestDemoTrainRejects(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"negative checkpoint interval": {[]string{"--checkpoint-every", "-1"}, "--checkpoint-every"},
		"negative checkpoint size":     {[]string{"--checkpoint-size", "-1"}, "--checkpoint-size"},
		"zero step time":               {[]string{"--step-time", "0s"}, "--step-time"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := runGangway(t, append([]string{"demo-train"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
			if out != "" {
				t.Errorf("printed before rejecting: %s", out)
			}
		})
	}
}
