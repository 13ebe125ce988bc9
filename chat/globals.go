package chat

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// addHelpers puts the functions Hugging Face gives every chat template into the render's
// variables. Variables sit above the engine's own globals, so these replace its versions:
// raise_exception so that the caller can tell a template's refusal (*RaiseError) from a
// template bug, strftime_now so that it reads the template's clock and knows more of
// strftime, range so that it has the sandbox's size limit. tojsonName is the filter tojson is renamed to (tojson.go).
func addHelpers(data map[string]jinja.Value, now func() time.Time) {
	data["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), fmt.Errorf("strftime_now takes one format string")
		}
		return jinja.NewString(strftime(now(), args[0].AsString())), nil
	})
	data["range"] = jinja.NewCallable("range", rangeLimited)
	data[tojsonName] = jinja.NewCallable("tojson", filterToJSON)
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), &RaiseError{Message: "raise_exception called without a message"}
	}
	msg := args[0].String()
	if args[0].IsString() {
		msg = args[0].AsString()
	}
	return jinja.Undefined(), &RaiseError{Message: msg}
}

// strftime formats t as Python's datetime.now().strftime(format) does on Linux (glibc,
// C locale). datetime.now() is naive, so %z and %Z are empty. A '-' after '%' drops the
// zero padding (glibc). An unknown directive is written as it stands, as glibc does.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		if s, ok := strftimeDirective(t, format[i], pad); ok {
			b.WriteString(s)
		} else {
			b.WriteString(format[i-1 : i+1])
		}
	}
	return b.String()
}

func strftimeDirective(t time.Time, d byte, pad bool) (string, bool) {
	num := func(n, width int) string {
		s := strconv.Itoa(n)
		if pad && len(s) < width {
			s = strings.Repeat("0", width-len(s)) + s
		}
		return s
	}
	hour12 := t.Hour() % 12
	if hour12 == 0 {
		hour12 = 12
	}
	switch d {
	case 'a':
		return t.Format("Mon"), true
	case 'A':
		return t.Format("Monday"), true
	case 'b', 'h':
		return t.Format("Jan"), true
	case 'B':
		return t.Format("January"), true
	case 'd':
		return num(t.Day(), 2), true
	case 'e':
		return fmt.Sprintf("%2d", t.Day()), true
	case 'H':
		return num(t.Hour(), 2), true
	case 'I':
		return num(hour12, 2), true
	case 'j':
		return num(t.YearDay(), 3), true
	case 'm':
		return num(int(t.Month()), 2), true
	case 'M':
		return num(t.Minute(), 2), true
	case 'p':
		return t.Format("PM"), true
	case 'S':
		return num(t.Second(), 2), true
	case 'f':
		return fmt.Sprintf("%06d", t.Nanosecond()/1000), true
	case 'w':
		return strconv.Itoa(int(t.Weekday())), true
	case 'y':
		return num(t.Year()%100, 2), true
	case 'Y':
		return strconv.Itoa(t.Year()), true
	case 'z', 'Z':
		return "", true
	case 'F':
		return strftime(t, "%Y-%m-%d"), true
	case 'D', 'x':
		return strftime(t, "%m/%d/%y"), true
	case 'T', 'X':
		return strftime(t, "%H:%M:%S"), true
	case 'c':
		return strftime(t, "%a %b %e %H:%M:%S %Y"), true
	case '%':
		return "%", true
	}
	return "", false
}

// maxRange is the most items range() makes, the limit of Jinja's sandbox (which Hugging Face
// renders in): the engine's own range has none, and range(10**12) in a template from a
// model file would take all memory.
const maxRange = 100000

func rangeLimited(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	bounds := make([]int64, len(args))
	for i, a := range args {
		if !a.IsInt() {
			return jinja.Undefined(), fmt.Errorf("range: arguments must be integers, not %s", a.String())
		}
		bounds[i] = a.AsInt()
	}
	start, stop, step := int64(0), int64(0), int64(1)
	switch len(bounds) {
	case 1:
		stop = bounds[0]
	case 2:
		start, stop = bounds[0], bounds[1]
	case 3:
		start, stop, step = bounds[0], bounds[1], bounds[2]
	default:
		return jinja.Undefined(), fmt.Errorf("range: 1 to 3 arguments, not %d", len(args))
	}
	if step == 0 {
		return jinja.Undefined(), fmt.Errorf("range: step must not be zero")
	}
	var items []jinja.Value
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(items) == maxRange {
			return jinja.Undefined(), fmt.Errorf("range: more than %d items (the sandbox's limit)", maxRange)
		}
		items = append(items, jinja.NewInt(i))
		if (step > 0 && i > stop-step) || (step < 0 && i < stop-step) {
			break // the next i would pass stop, or overflow
		}
	}
	return jinja.NewList(items), nil
}
