package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// logFlags are llama.cpp's logging options: -v/--verbose, --log-disable, --log-file FILE, and
// --color (accepted; gorun writes no colours).
type logFlags struct {
	verbose, disable bool
	file             string
	color            onOffAuto
}

func (l *logFlags) register(fs interface {
	Var(flag.Value, string, string)
	BoolVar(*bool, string, bool, string)
	StringVar(*string, string, string, string)
}) {
	fs.BoolVar(&l.verbose, "v", false, "verbose: log more (what each command's help says)")
	fs.BoolVar(&l.verbose, "verbose", false, "same as -v")
	fs.BoolVar(&l.disable, "log-disable", false, "write no informational lines to stderr (timings, the seed, notes); errors still are")
	fs.StringVar(&l.file, "log-file", "", "also append the informational lines to `FILE`")
	fs.Var(&l.color, "color", "colours: on, off or auto; accepted for llama.cpp's command lines (gorun writes no colours)")
}

// open returns where informational lines go: stderr, nowhere (--log-disable), and also the
// --log-file; close closes that file.
func (l *logFlags) open(stderr io.Writer) (w io.Writer, close func() error, err error) {
	w, close = stderr, func() error { return nil }
	if l.disable {
		w = io.Discard
	}
	if l.file == "" {
		return w, close, nil
	}
	f, err := os.OpenFile(l.file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--log-file: %w", err)
	}
	return io.MultiWriter(w, f), f.Close, nil
}
