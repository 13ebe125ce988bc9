package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/llm"
)

// Bounds on the text files gorun reads, so that no file (an endless device, a huge file)
// can exhaust memory: a prompt (-f of run and tokenize) is at most maxPromptBytes (a context
// holds at most a million tokens, a few megabytes of text); a text to score or calibrate on
// (perplexity -f, quantize --calib) at most maxTextBytes.
const (
	maxPromptBytes = 32 << 20
	maxTextBytes   = 256 << 20
)

// readInput reads the regular file named by option (a FIFO or a device is refused without
// blocking), refusing one over limit bytes before reading it.
func readInput(option, path string, limit int64) ([]byte, error) {
	b, err := osutil.ReadFile(path, limit)
	if errors.Is(err, osutil.ErrTooLarge) {
		return nil, fmt.Errorf("%s %s: the file is over the limit of %d MiB for this input", option, path, limit>>20)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", option, err)
	}
	return b, nil
}

// isStdin reports whether an input file name means the standard input: "-" or /dev/stdin
// (which osutil.ReadFile, refusing devices and pipes, would not read).
func isStdin(path string) bool { return path == "-" || path == "/dev/stdin" }

// readStdin reads the standard input to its end, refusing more than limit bytes.
func readStdin(option string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(os.Stdin, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the standard input: %w", option, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: the standard input is over the limit of %d MiB for this input", option, limit>>20)
	}
	return b, nil
}

// memLimit is the value of --mem-limit: bytes, with an optional K, M, G or T suffix (powers
// of 1024), "auto" (the machine's available memory) or "off".
type memLimit int64

func (m *memLimit) String() string {
	switch {
	case *m == 0:
		return "auto"
	case *m < 0:
		return "off"
	}
	return llm.FormatBytes(int64(*m))
}

func (m *memLimit) Set(s string) error {
	switch strings.ToLower(s) {
	case "auto", "":
		*m = 0
		return nil
	case "off", "none":
		*m = -1
		return nil
	}
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I")
	shift := 0
	if n := len(t); n > 0 {
		if k := strings.IndexByte("KMGT", t[n-1]); k >= 0 {
			shift, t = 10*(k+1), t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v >= 1) || v*float64(int64(1)<<shift) >= 1<<62 {
		return fmt.Errorf("want a size such as 512M, 8G or 17179869184, or auto or off")
	}
	*m = memLimit(v * float64(int64(1)<<shift))
	return nil
}

// kvBudget is the value of --kv-budget: a count of positions, or bytes when it has a unit (K,
// M, G or T, powers of 1024, as --mem-limit).
type kvBudget struct {
	positions int
	bytes     int64
}

func (k *kvBudget) String() string {
	switch {
	case k.positions > 0:
		return strconv.Itoa(k.positions)
	case k.bytes > 0:
		return llm.FormatBytes(k.bytes)
	}
	return "auto"
}

func (k *kvBudget) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 1<<30 {
			return fmt.Errorf("want 1..%d positions, or a size such as 512M or 2G", 1<<30)
		}
		*k = kvBudget{positions: n}
		return nil
	}
	var m memLimit
	if err := m.Set(s); err != nil || m <= 0 {
		return fmt.Errorf("want a count of positions such as 32768, or a size such as 512M or 2G")
	}
	*k = kvBudget{bytes: int64(m)}
	return nil
}

// promptTooLong explains a prompt of n tokens that a context of size cannot hold with a
// generated token, suggesting a larger -c only when the model allows one.
func promptTooLong(m *llm.Model, n, size int) error {
	fix := "shorten the prompt"
	if trained := m.Hparams().NCtx; size < trained {
		fix = fmt.Sprintf("raise -c (up to the model's %d) or shorten the prompt", trained)
	} else {
		fix += fmt.Sprintf(" (the context is at the model's most, %d)", trained)
	}
	return fmt.Errorf("%w: the prompt has %d tokens and the context holds %d, with room for at least one generated token; %s",
		llm.ErrContextFull, n, size, fix)
}

// checkPromptFits refuses, before anything is printed, a prompt that leaves the session's
// context no room for a generated token.
func checkPromptFits(m *llm.Model, s *llm.Session, prompt string) error {
	n := len(m.Tokenize(prompt, s.Pos() == 0))
	if size := s.ContextLength(); s.Pos()+n >= size {
		return promptTooLong(m, n, size)
	}
	return nil
}
