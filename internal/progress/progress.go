// Package progress draws a progress bar on a terminal, sized to its width so that a redraw
// stays on one line, or prints plain lines when the output is a file or a pipe (so logs stay
// readable).
package progress

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
	cols   int // the terminal's width: a drawn line is at most cols-1 wide
	format func(int64) string
}

// defaultCols is the width assumed when a terminal does not say ($COLUMNS first).
const defaultCols = 80

// New makes a bar for total units of work, drawing on w: a bar when w is a terminal, lines
// otherwise.
func New(w io.Writer, label string, total int64) *Bar {
	cols, tty := 0, false
	if f, ok := w.(*os.File); ok {
		cols, tty = terminalWidth(f)
	}
	if cols <= 0 {
		cols = defaultCols
		if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 0 {
			cols = c
		}
	}
	return newBar(w, label, total, tty, cols)
}

func newBar(w io.Writer, label string, total int64, tty bool, cols int) *Bar {
	return &Bar{w: w, label: label, total: max(total, 1), tty: tty, start: time.Now(), cols: cols,
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
	fmt.Fprint(b.w, "\r"+b.line(done, note, now))
	b.drawn = true
}

// line is the bar's text, padded to the width so that it overwrites a longer previous one,
// and never wider than the terminal less one column (a full line would wrap on some).
// What does not fit goes in this order: the note, the ETA, the bar itself (down to 10
// columns, then none), the label's end.
func (b *Bar) line(done int64, note string, now time.Time) string {
	width := max(b.cols-1, 20)
	frac := min(1, float64(done)/float64(b.total))
	eta := ""
	if el := now.Sub(b.start); frac > 0 && frac < 1 {
		eta = fmt.Sprintf(" ETA %s", (time.Duration(float64(el)/frac) - el).Round(time.Second))
	}
	counts := fmt.Sprintf(" %3.0f%% %s/%s", 100*frac, b.format(done), b.format(b.total))
	label := b.label
	barCols := min(30, width-len(label)-len(counts)-len(eta)-3) // " [" and "]"
	if barCols < 10 {
		eta = ""
		barCols = min(30, width-len(label)-len(counts)-3)
	}
	text := label
	if barCols >= 10 {
		fill := int(frac * float64(barCols))
		text += " [" + strings.Repeat("=", fill) + strings.Repeat(" ", barCols-fill) + "]"
	}
	text += counts + eta
	if room := width - len(text) - 1; room > 0 && note != "" {
		text += " " + truncate(note, room)
	}
	text = truncate(text, width)
	return text + strings.Repeat(" ", width-len(text))
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Done finishes the bar's line.
func (b *Bar) Done() {
	if b.tty && b.drawn {
		fmt.Fprintln(b.w)
	}
}
