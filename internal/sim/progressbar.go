package sim

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// ProgressBar shows a replay's Progress callbacks: done/total on a
// terminal, redrawn in place at most every 100ms; elsewhere (a log, CI) a
// line every 10%.
type ProgressBar struct {
	mu        sync.Mutex
	w         io.Writer
	label     string
	unit      string // what done and total count
	tty       bool
	start     time.Time
	last      time.Time
	lastTenth int
	drawn     bool
}

// NewProgressBar draws on w, each line starting with label; unit names what
// done and total count ("arrivals").
func NewProgressBar(w io.Writer, label, unit string) *ProgressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &ProgressBar{w: w, label: label, unit: unit, tty: tty, start: time.Now(), lastTenth: -1}
}

// Update shows done of total; it is a Progress callback.
func (b *ProgressBar) Update(done, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if total <= 0 {
		return
	}
	frac := float64(done) / float64(total)
	elapsed := time.Since(b.start).Round(100 * time.Millisecond)
	if !b.tty {
		if tenth := int(frac * 10); tenth > b.lastTenth {
			b.lastTenth = tenth
			fmt.Fprintf(b.w, "%s: %3.0f%% (%d/%d %s, %s)\n", b.label, 100*frac, done, total, b.unit, elapsed)
		}
		return
	}
	now := time.Now()
	if done < total && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	b.last = now
	const width = 30
	n := int(frac * width)
	fmt.Fprintf(b.w, "\r%s [%s%s] %3.0f%% %s", b.label, strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*frac, elapsed)
	b.drawn = true
}

// Done ends the bar's line on a terminal.
func (b *ProgressBar) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty && b.drawn {
		fmt.Fprintln(b.w)
	}
}
