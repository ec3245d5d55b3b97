package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names of the files in which a workload reports its training step, at the
// top of the directory it checkpoints into.
const (
	// StepFile holds the step as a decimal integer ("1200\n").
	StepFile = "step"
	// WorkloadManifestFile is a JSON object whose "step" member is the
	// step ({"step": 1200, ...}); its other members are the workload's
	// own. It is read only when there is no StepFile.
	WorkloadManifestFile = "manifest.json"
)

// ReadStep returns the training step a workload reported in dir (see
// StepFile and WorkloadManifestFile): nil and no error when it reported
// none, an error when a report is there but malformed. Save reads it when
// its caller passes no step.
func ReadStep(dir string) (*int64, error) {
	data, err := os.ReadFile(filepath.Join(dir, StepFile))
	if err == nil {
		step, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || step < 0 {
			return nil, fmt.Errorf("%s in %s is not a non-negative integer: %q", StepFile, dir, truncate(data))
		}
		return &step, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read step: %w", err)
	}
	data, err = os.ReadFile(filepath.Join(dir, WorkloadManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read step: %w", err)
	}
	var report struct {
		Step json.RawMessage `json:"step"`
	}
	if err := json.Unmarshal(data, &report); err != nil {
		return nil, fmt.Errorf("%s in %s: %w", WorkloadManifestFile, dir, err)
	}
	if report.Step == nil || string(report.Step) == "null" {
		return nil, nil
	}
	// ParseInt also refuses a quoted number, a fraction and an exponent.
	step, err := strconv.ParseInt(string(report.Step), 10, 64)
	if err != nil || step < 0 {
		return nil, fmt.Errorf("%s in %s: step %s is not a non-negative integer", WorkloadManifestFile, dir, report.Step)
	}
	return &step, nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
