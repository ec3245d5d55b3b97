package spotpolicy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// FuzzParseTrace: ParseTrace never panics, names the trace in its errors,
// and what it accepts is a valid trace that answers for any offset.
// Regression inputs are in testdata/fuzz/FuzzParseTrace.
func FuzzParseTrace(f *testing.F) {
	// The shape of the real traces (when present), cut to their first
	// ticks: whole files are too large to mutate quickly.
	files, _ := filepath.Glob(sharedTraces + "/*/*/*/*.json")
	for _, file := range files[:min(3, len(files))] {
		var raw map[string]any
		if data, err := os.ReadFile(file); err == nil && json.Unmarshal(data, &raw) == nil {
			for _, k := range []string{"data", "prices"} {
				if l, ok := raw[k].([]any); ok {
					raw[k] = l[:min(20, len(l))]
				}
			}
			data, _ := json.Marshal(raw)
			f.Add(data)
		}
	}
	f.Add([]byte(`{"metadata":{"gap_seconds":1800},"data":[1,0,1,1],"prices":[0.5,0.5,0.6,0.6]}`))
	f.Add([]byte(`{"metadata":{"gap_seconds":32},"data":[2,2]}`))
	f.Add([]byte(`{"metadata":{"gap_seconds":3.2e1},"data":[1,0],"prices":[1e0,2.5]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := spotpolicy.ParseTrace(bytes.NewReader(data), "t.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "spot trace t.json") {
				t.Fatalf("error %q does not name the trace", err)
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("accepted trace fails Validate: %v", err)
		}
		if tr.Duration() <= 0 {
			t.Fatalf("accepted trace lasts %v", tr.Duration())
		}
		for _, off := range []time.Duration{0, -time.Second, tr.Gap, tr.Duration(), 1<<62 - 1, -1 << 62} {
			if n, _, _ := tr.At(off); n < 0 {
				t.Fatalf("At(%v) = %d spot instances", off, n)
			}
		}
		if a := tr.Availability(); a < 0 || a > 1 {
			t.Fatalf("availability %v", a)
		}
	})
}
