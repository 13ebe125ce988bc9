// Package stopstr finds stop strings in generated text as it streams, holding back text that
// may be the beginning of one (so that a stop string split over tokens is never shown in part).
// The library's generation loop (which the CLI and the server call) uses it, and the CLI's
// interactive mode finds its shown reverse prompts with it.
package stopstr

import "strings"

// Matcher scans streamed text for any of Stops.
type Matcher struct {
	Stops []string
	held  string
}

// Add appends text and returns what can be released; hit reports a stop string (the text
// released is then what comes before it, and which is the stop string found).
func (m *Matcher) Add(text string) (out string, hit bool, which string) {
	if len(m.Stops) == 0 {
		return text, false, ""
	}
	t := m.held + text
	if i, w := m.Find(t); i >= 0 {
		m.held = ""
		return t[:i], true, w
	}
	// Hold back the longest end of t that begins a stop string.
	keep := 0
	for _, stop := range m.Stops {
		for k := min(len(stop)-1, len(t)); k > keep; k-- {
			if strings.HasSuffix(t, stop[:k]) {
				keep = k
				break
			}
		}
	}
	m.held = t[len(t)-keep:]
	return t[:len(t)-keep], false, ""
}

// Find returns the earliest position of a stop string in t and which one, or -1.
func (m *Matcher) Find(t string) (int, string) {
	best, which := -1, ""
	for _, stop := range m.Stops {
		if i := strings.Index(t, stop); i >= 0 && (best < 0 || i < best) {
			best, which = i, stop
		}
	}
	return best, which
}

// TakeHeld returns the text held back and forgets it.
func (m *Matcher) TakeHeld() string {
	h := m.held
	m.held = ""
	return h
}
