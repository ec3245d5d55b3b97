package accounting

import (
	"testing"
	"time"
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
