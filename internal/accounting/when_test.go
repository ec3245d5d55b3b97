package accounting

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2025, 7, 10, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		"days":          {in: "7d", want: now.Add(-7 * 24 * time.Hour)},
		"fraction days": {in: "1.5d", want: now.Add(-36 * time.Hour)},
		"days and more": {in: "1d12h", want: now.Add(-36 * time.Hour)},
		"hours":         {in: "36h", want: now.Add(-36 * time.Hour)},
		"rfc3339":       {in: "2025-06-01T08:00:00+02:00", want: time.Date(2025, 6, 1, 6, 0, 0, 0, time.UTC)},
		"date":          {in: "2025-06-01", want: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)},
		"negative":      {in: "-3h", wantErr: true},
		"junk":          {in: "last week", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseWhen(tc.in, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseWhen(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if !tc.wantErr && !got.Equal(tc.want) {
				t.Errorf("ParseWhen(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
func TestParseQuery(t *testing.T) {
	now := time.Date(2025, 6, 8, 12, 30, 0, 0, time.FixedZone("CEST", 2*3600))
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	tests := map[string]struct {
		by, since, until string
		want             Query
		wantErrParts     []string
	}{
		"defaults": {
			by: "team", since: "7d",
			want: Query{By: gangway.CostByTeam, Since: utc("2025-06-01T10:30:00Z"), Until: utc("2025-06-08T10:30:00Z")},
		},
		"hours": {
			by: "pool", since: "36h",
			want: Query{By: gangway.CostByPool, Since: utc("2025-06-06T22:30:00Z"), Until: utc("2025-06-08T10:30:00Z")},
		},
		"days and hours, until a duration": {
			by: "project", since: "1d12h", until: "30m",
			want: Query{By: gangway.CostByProject, Since: utc("2025-06-06T22:30:00Z"), Until: utc("2025-06-08T10:00:00Z")},
		},
		"fractional days": {
			by: "team", since: "1.5d",
			want: Query{By: gangway.CostByTeam, Since: utc("2025-06-06T22:30:00Z"), Until: utc("2025-06-08T10:30:00Z")},
		},
		"times": {
			by: "team", since: "2025-05-01T00:00:00+02:00", until: "2025-06-01",
			want: Query{By: gangway.CostByTeam, Since: utc("2025-04-30T22:00:00Z"), Until: utc("2025-06-01T00:00:00Z")},
		},
		"bad grouping":         {by: "region", since: "7d", wantErrParts: []string{"by", `"region"`}},
		"bad since":            {by: "team", since: "7 days", wantErrParts: []string{"since", `"7 days"`}},
		"negative since":       {by: "team", since: "-3h", wantErrParts: []string{"since", `"-3h"`}},
		"days without a count": {by: "team", since: "d", wantErrParts: []string{"since"}},
		"empty since":          {by: "team", since: "", wantErrParts: []string{"since"}},
		"bad until":            {by: "team", since: "7d", until: "yesterday", wantErrParts: []string{"until", `"yesterday"`}},
		"since after until":    {by: "team", since: "1d", until: "2d", wantErrParts: []string{"since", "until", "not before"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseQuery(tc.by, tc.since, tc.until, now)
			if tc.wantErrParts != nil {
				if err == nil {
					t.Fatalf("ParseQuery = %+v, want an error", got)
				}
				for _, part := range tc.wantErrParts {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not name %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseQuery (-want +got):\n%s", diff)
			}
		})
	}
}
