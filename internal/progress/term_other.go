//go:build !unix

package progress

import "os"

// terminalWidth reports whether f is a terminal (a character device), its width unknown.
func terminalWidth(f *os.File) (int, bool) {
	st, err := f.Stat()
	return 0, err == nil && st.Mode()&os.ModeCharDevice != 0
}
