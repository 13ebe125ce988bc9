//go:build unix

package progress

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminalWidth reports whether f is a terminal, and its width in columns (0 when unknown).
// A character device that is not a terminal (/dev/null) is not one.
func terminalWidth(f *os.File) (int, bool) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, false
	}
	return int(ws.Col), true
}
