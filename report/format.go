package report

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogate/slogate/synth"
)

// Number and label formats shared by the Markdown and HTML reports. Figures follow the
// published write-ups: thousands separators ("15,600", "1,053 ms"), about three significant digits
// below 100, and "—" for what does not apply or was not measured.

const dash = "—"

// notRun marks a grid position with no cell in the report: the run ended before it.
// It never appears in a Report.
const notRun synth.State = "not_run"

// stateLabel is a state's name in reports, as the published write-ups print it.
func stateLabel(s synth.State) string {
	switch s {
	case synth.Valid:
		return "Valid"
	case synth.LoopedState:
		return "Looped"
	case synth.OverCapacity:
		return "Over capacity"
	case synth.Failed:
		return "Failed"
	case synth.Skipped:
		return "Skipped"
	case notRun:
		return dash
	}
	return string(s) // rej, n/c: the write-ups print these as they are
}

// stateMeanings explains each state in the legends.
var stateMeanings = map[synth.State]string{
	synth.Valid:        "measured; the figure is the median over the rounds without failures",
	synth.LoopedState:  "the model kept repeating the same text, so the measurement was discarded",
	synth.OverCapacity: "not run because this many requests of this size would exceed the server's KV cache",
	synth.Rejected:     "the server refused every request",
	synth.NotCompleted: "no request finished inside the window",
	synth.Failed:       "requests failed in every round (the detail column says how)",
	synth.Skipped:      "not run because a smaller concurrency of the same row failed (staged protection)",
	notRun:             "not measured: the run ended before this cell",
}

// legendStates returns, in a fixed order, the states other than Valid that occur in
// states.
func legendStates(present map[synth.State]bool) []synth.State {
	var out []synth.State
	for _, s := range append(synth.States(), notRun) {
		if s != synth.Valid && present[s] {
			out = append(out, s)
		}
	}
	return out
}

// group formats v with dec decimals and thousands separators; "—" for NaN or infinity.
func group(v float64, dec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return dash
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', dec, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if v < 0 && strings.Trim(s, "0.") != "" {
		b.WriteByte('-')
	}
	for i := range len(whole) {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(whole[i])
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}

// sig3 formats v with about three significant digits: 1,053 · 52.3 · 4.83.
func sig3(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return group(v, 0)
	case a >= 10:
		return group(v, 1)
	}
	return group(v, 2)
}

// whenPositive formats a measured figure with f, or "—" when it is zero (not measured).
func whenPositive(v float64, f func(float64) string) string {
	if !(v > 0) || math.IsInf(v, 0) {
		return dash
	}
	return f(v)
}

// fmtTokS formats tokens per second.
func fmtTokS(v float64) string { return whenPositive(v, sig3) }

// fmtMS formats seconds as milliseconds (without the unit).
func fmtMS(seconds float64) string {
	return whenPositive(seconds, func(s float64) string { return sig3(s * 1000) })
}

// fmtReqS formats requests per second, which are often below 1: 1.75 · 0.875.
func fmtReqS(v float64) string {
	return whenPositive(v, func(v float64) string {
		if v < 1 {
			return group(v, 3)
		}
		return sig3(v)
	})
}

// fmtInt formats a count.
func fmtInt(n int) string { return group(float64(n), 0) }

// fmtPct formats a fraction as a percentage with one decimal, "100%" when whole.
func fmtPct(x float64) string {
	s := group(x*100, 1)
	if s == dash {
		return s
	}
	return strings.TrimSuffix(s, ".0") + "%"
}

// fmtMultiple formats a scan multiple: 0.5×.
// fmtMultiple formats a multiple of the reference rate with at most two decimals
// (calibration bisects between multiples such as 1.155818…×); 0.5× stays 0.5×.
func fmtMultiple(m float64) string {
	return strconv.FormatFloat(math.Round(m*100)/100, 'f', -1, 64) + "×"
}

// fmtTime formats a timestamp in UTC, or "—" for the zero time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return dash
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// fmtSpan formats the time between start and end to the second, or "—".
func fmtSpan(start, end time.Time) string {
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return dash
	}
	return fmtDuration(end.Sub(start).Round(time.Second))
}

// fmtDuration writes a duration without trailing zero units: 30s, 1m, 1h12m14s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fmtDurationMS formats a tick on a milliseconds axis: 50 ms, 1 s, 20 s.
func fmtDurationMS(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', -1, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'f', -1, 64) + " ms"
}

// clipRunes shortens s to at most n runes, ending it with "…" when cut.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
