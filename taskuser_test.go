package gangway

import (
	"strings"
	"testing"
)

func TestTaskUsersFor(t *testing.T) {
	policy := TaskUsers{Teams: map[string][]string{"nlp": {"gw-nlp", "gw-nlp-big"}}}
	withDefault := TaskUsers{Teams: policy.Teams, Default: "gw-any"}
	tests := map[string]struct {
		u           TaskUsers
		team, runAs string
		want        string
		wantErr     string
	}{
		"no policy: the agent's user":   {team: "nlp"},
		"no policy refuses runAs":       {team: "nlp", runAs: "gw-nlp", wantErr: `runAs "gw-nlp" is not allowed: this site runs every task as the agent's user`},
		"team default":                  {u: policy, team: "nlp", want: "gw-nlp"},
		"team picks another of its own": {u: policy, team: "nlp", runAs: "gw-nlp-big", want: "gw-nlp-big"},
		"runAs of another team":         {u: policy, team: "nlp", runAs: "gw-vision", wantErr: `runAs "gw-vision" is not one of team nlp's users [gw-nlp gw-nlp-big]`},
		"unlisted team refused":         {u: policy, team: "vision", wantErr: `team "vision" has no Unix user to run its tasks as`},
		"unlisted team, default user":   {u: withDefault, team: "vision", want: "gw-any"},
		"unlisted team may not pick":    {u: withDefault, team: "vision", runAs: "gw-nlp", wantErr: `runAs "gw-nlp" is not one of team vision's users [gw-any]`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.u.For(tc.team, tc.runAs)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("For(%q, %q) = %q, %v; want error %q", tc.team, tc.runAs, got, err, tc.wantErr)
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Fatalf("For(%q, %q) = %q, %v; want %q", tc.team, tc.runAs, got, err, tc.want)
			}
		})
	}
}

func TestValidateRunAs(t *testing.T) {
	policy := WithTaskUsers(TaskUsers{Teams: map[string][]string{"ml": {"gw-ml"}}})
	tests := map[string]struct {
		runAs   string
		opts    []ValidateOption
		wantErr string
	}{
		"unset":                      {},
		"a user name, no policy":     {runAs: "gw-ml"},
		"not a user name":            {runAs: "Bad User", wantErr: `runAs: must be a Unix user name`},
		"allowed by the policy":      {runAs: "gw-ml", opts: []ValidateOption{policy}},
		"another team's, refused":    {runAs: "gw-nlp", opts: []ValidateOption{policy}, wantErr: `runAs: runAs "gw-nlp" is not one of team ml's users [gw-ml]`},
		"team default by the policy": {opts: []ValidateOption{policy}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := validSpec()
			s.Team, s.RunAs = "ml", tc.runAs
			err := s.Validate(tc.opts...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
