package gangway

import "testing"

func TestCostCell(t *testing.T) {
	for _, tc := range []struct {
		v        float64
		decimals int
		want     string
	}{
		{0, 1, "0.0"},
		{3, 1, "3.0"},
		{11.04, 1, "11.0"},
		{0.05, 1, "0.1"},
		{0.044, 1, "0.044"},   // a few GPU-minutes: not "0.0"
		{0.0035, 2, "0.0035"}, // a fraction of a cent, as FormatDollars shows it
		{0.18, 2, "0.18"},
		{-0.004, 2, "-0.0040"},
		{1e-12, 2, "0.00"}, // below anything worth a digit
	} {
		if got := cell(tc.v, tc.decimals); got != tc.want {
			t.Errorf("cell(%v, %d) = %q, want %q", tc.v, tc.decimals, got, tc.want)
		}
	}
}
