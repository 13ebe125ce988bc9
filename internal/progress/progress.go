// Package progress draws a progress bar on a terminal, or prints plain lines when the output is
// a file or a pipe (so logs stay readable).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Bar reports the progress of work measured in units (bytes, tokens, chunks).
type Bar struct {
	w      io.Writer
	label  string
	total  int64
	tty    bool
	start  time.Time
	last   time.Time
	drawn  bool
	width  int
	format func(int64) string
}

// New makes a bar for total units of work, drawing on w.
func New(w io.Writer, label string, total int64) *Bar {
	return &Bar{w: w, label: label, total: max(total, 1), tty: isTerminal(w), start: time.Now(), width: 30,
		format: func(n int64) string { return fmt.Sprint(n) }}
}

// Bytes makes the bar show its units as MiB.
func (b *Bar) Bytes() *Bar {
	b.format = func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
	return b
}

// Resize changes the total (for work whose size is learnt late).
func (b *Bar) Resize(total int64) *Bar {
	b.total = max(total, 1)
	return b
}

// Set reports that done units are complete, with a note on what is being worked on. On a
// terminal the bar is redrawn at most ten times a second; elsewhere a line is printed per call
// only when line is true.
func (b *Bar) Set(done int64, note string, line bool) {
	if !b.tty {
		if line {
			fmt.Fprintf(b.w, "%s: %3.0f%% %s\n", b.label, 100*float64(done)/float64(b.total), note)
		}
		return
	}
	now := time.Now()
	if done < b.total && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	b.last = now
	frac := min(1, float64(done)/float64(b.total))
	fill := int(frac * float64(b.width))
	eta := ""
	if el := now.Sub(b.start); frac > 0 && frac < 1 {
		eta = fmt.Sprintf(" ETA %s", (time.Duration(float64(el)/frac) - el).Round(time.Second))
	}
	if len(note) > 40 {
		note = note[:40]
	}
	fmt.Fprintf(b.w, "\r%s [%s%s] %3.0f%% %s/%s%s %-40s", b.label, strings.Repeat("=", fill), strings.Repeat(" ", b.width-fill),
		100*frac, b.format(done), b.format(b.total), eta, note)
	b.drawn = true
}

// Done finishes the bar's line.
func (b *Bar) Done() {
	if b.tty && b.drawn {
		fmt.Fprintln(b.w)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
