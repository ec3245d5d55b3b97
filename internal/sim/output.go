package sim

import (
	"errors"
	"fmt"
	"io"
)

// Report is what a replay's result can write: a table, JSON lines, the
// per-run series as CSV files, a chart.
type Report interface {
	WriteJSON(io.Writer) error
	WriteText(io.Writer) error
	WriteCSV(dir string) ([]string, error)
	WritePlot(path string) error
}

// Output is where a replay's report goes: Format ("text" or "json") to
// Out, the CSV series to CSVDir and the chart to Plot when they are set,
// and a line per file written to Log.
type Output struct {
	Format, CSVDir, Plot string
	Out, Log             io.Writer
}

// CheckFormat is nil for the formats every report writes, text and json.
func CheckFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("--output: want text or json, got %q", format)
	}
	return nil
}

// Write writes the report of a replay of protocol proto ("fgd", "trace",
// ...): the table or JSON, then the CSV files and the chart when asked.
func (o Output) Write(proto string, r Report) error {
	var err error
	if o.Format == "json" {
		err = r.WriteJSON(o.Out)
	} else {
		err = r.WriteText(o.Out)
	}
	if err != nil {
		return err
	}
	if o.CSVDir != "" {
		files, err := r.WriteCSV(o.CSVDir)
		if err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
		fmt.Fprintf(o.Log, "%s: wrote %d files to %s\n", proto, len(files), o.CSVDir)
	}
	if o.Plot != "" {
		if err := r.WritePlot(o.Plot); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		fmt.Fprintf(o.Log, "%s: wrote %s\n", proto, o.Plot)
	}
	return nil
}

// FlagErrors names each of a replay's bad settings by its flag: the
// Field of an *InputError, from a Validate or a loader, is the flag's
// name. Other errors are returned as they are.
func FlagErrors(err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, FlagErrors(e))
		}
		return errors.Join(errs...)
	}
	if ie := (*InputError)(nil); errors.As(err, &ie) {
		return fmt.Errorf("--%s: %w", ie.Field, ie.Err)
	}
	return err
}

// summaryCSV is a spot result whose table is its summary CSV
// (`gangway replay spot --output csv`).
type summaryCSV struct{ *SpotResult }

func (c summaryCSV) WriteText(w io.Writer) error { return c.WriteSummaryCSV(w) }

// SummaryCSV is the result as a Report whose text is the summary CSV.
func (r *SpotResult) SummaryCSV() Report { return summaryCSV{r} }
