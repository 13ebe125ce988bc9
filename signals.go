package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// removeOnSignal removes the temporary files of a command that writes its output through them
// (quantize, convert, pull) and exits, 130 for SIGINT and 143 for SIGTERM as shells report
// them, when the process is interrupted or terminated, until the returned function is called.
// gguf's writer uses predictable temporary names, so even a SIGKILL, which no handler sees,
// leaves at most one per output, replaced by the next run.
func removeOnSignal(stderr io.Writer, command string, files ...string) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			var removed []string
			for _, f := range files {
				if os.Remove(f) == nil {
					removed = append(removed, f)
				}
			}
			msg := "stopped"
			if len(removed) > 0 {
				msg += ", removed " + strings.Join(removed, " and ")
			}
			fmt.Fprintf(stderr, "\ngorun %s: %v: %s\n", command, sig, msg)
			code := exitInterrupted
			if sig == syscall.SIGTERM {
				code = 128 + int(syscall.SIGTERM)
			}
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
