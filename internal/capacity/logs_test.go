package capacity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
)

func logLine(i int) gangway.LogLine {
	return gangway.LogLine{Time: t0.Add(time.Duration(i) * time.Second), Rank: i % 2, Attempt: 1, Text: "step " + string(rune('a'+i))}
}

func TestLogs(t *testing.T) {
	rdb := startRedis(t)
	ignoreID := cmpopts.IgnoreFields(gangway.LogLine{}, "ID")

	tests := map[string]struct {
		lines     int
		afterLine int // 0: from the start; n: after the n-th line
		block     time.Duration
		want      []gangway.LogLine
	}{
		"no lines":       {want: []gangway.LogLine{}},
		"all lines":      {lines: 3, want: []gangway.LogLine{logLine(0), logLine(1), logLine(2)}},
		"after a line":   {lines: 3, afterLine: 1, want: []gangway.LogLine{logLine(1), logLine(2)}},
		"after the last": {lines: 3, afterLine: 3, want: []gangway.LogLine{}},
		"block returns existing lines at once": {
			lines: 2, afterLine: 1, block: time.Minute, want: []gangway.LogLine{logLine(1)},
		},
		"block from the start": {
			lines: 2, block: time.Minute, want: []gangway.LogLine{logLine(0), logLine(1)},
		},
		"block times out empty": {
			lines: 2, afterLine: 2, block: 50 * time.Millisecond, want: []gangway.LogLine{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			v := newView(rdb, Options{})
			for i := range tc.lines {
				must(t, v.AppendLog(ctx, "job", logLine(i)))
			}
			after := ""
			if tc.afterLine > 0 {
				all, err := v.Logs(ctx, "job", "", 0)
				must(t, err)
				after = all[tc.afterLine-1].ID
			}
			got, err := v.Logs(ctx, "job", after, tc.block)
			must(t, err)
			if diff := cmp.Diff(tc.want, got, ignoreID); diff != "" {
				t.Errorf("Logs() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLogsBlockWakesOnAppend(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := newView(rdb, Options{})
	must(t, v.AppendLog(ctx, "job", logLine(0)))
	first, err := v.Logs(ctx, "job", "", 0)
	must(t, err)

	errc := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		errc <- v.AppendLog(ctx, "job", logLine(1))
	}()
	got, err := v.Logs(ctx, "job", first[0].ID, 10*time.Second)
	must(t, err)
	must(t, <-errc)
	if diff := cmp.Diff([]gangway.LogLine{logLine(1)}, got, cmpopts.IgnoreFields(gangway.LogLine{}, "ID")); diff != "" {
		t.Errorf("Logs() mismatch (-want +got):\n%s", diff)
	}
	if len(got) == 1 && got[0].ID <= first[0].ID {
		t.Errorf("new line ID %s not after %s", got[0].ID, first[0].ID)
	}
}

func TestLogsCapped(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	const maxLen, appended = 100, 1000
	v := newView(rdb, Options{LogMaxLen: maxLen})
	jobs := []gangway.JobID{"capped", "other"}
	for i := range appended {
		must(t, v.AppendLog(ctx, jobs[0], gangway.LogLine{Time: t0, Text: "x"}))
		if i == 0 {
			must(t, v.AppendLog(ctx, jobs[1], gangway.LogLine{Time: t0, Text: "y"}))
		}
	}
	got, err := v.Logs(ctx, jobs[0], "", 0)
	must(t, err)
	// MAXLEN ~ trims whole stream nodes (100 entries by default), so the
	// length lands between the cap and a little above it.
	if len(got) < maxLen || len(got) >= appended/2 {
		t.Errorf("capped stream holds %d lines, want about %d", len(got), maxLen)
	}
	other, err := v.Logs(ctx, jobs[1], "", 0)
	must(t, err)
	if len(other) != 1 {
		t.Errorf("other job's stream holds %d lines, want 1", len(other))
	}
}
