package gangway

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// FuzzParseJobSpec: ParseJobSpec never panics, fails only with a
// non-empty *SpecError, and what it accepts validates again and comes back
// the same through JSON (the Temporal payload) and through YAML.
// Regression inputs are in testdata/fuzz/FuzzParseJobSpec.
func FuzzParseJobSpec(f *testing.F) {
	files, _ := filepath.Glob("examples/*.yaml")
	more, _ := filepath.Glob("testdata/jobspec/*.yaml")
	for _, file := range append(files, more...) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParseJobSpec(data)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) || len(se.Problems) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty *SpecError", err, err)
			}
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("accepted spec fails Validate: %v", err)
		}
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		var fromJSON JobSpec
		if err := json.Unmarshal(b, &fromJSON); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", b, err)
		}
		if diff := cmp.Diff(spec, fromJSON); diff != "" {
			t.Fatalf("JSON round trip (-want +got):\n%s", diff)
		}
		y, err := yaml.Marshal(spec)
		if err != nil {
			t.Fatalf("yaml.Marshal: %v", err)
		}
		fromYAML, err := ParseJobSpec(y)
		if err != nil {
			t.Fatalf("ParseJobSpec(yaml.Marshal(spec)): %v\n%s", err, y)
		}
		if diff := cmp.Diff(spec, fromYAML); diff != "" {
			t.Fatalf("YAML round trip (-want +got):\n%s", diff)
		}
	})
}
