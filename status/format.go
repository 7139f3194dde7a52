package status

import (
	"math"
	"strconv"
	"time"

	"github.com/slogate/slogate/measure"
)

// How the page writes numbers, durations and times.

// unknownDash stands for a figure that is not known.
const unknownDash = "–"

// fmtDur writes a latency: "8.5 ms", "240 ms", "1.25 s"; 0 is unknown.
func fmtDur(d time.Duration) string {
	switch ms := float64(d) / float64(time.Millisecond); {
	case d <= 0:
		return unknownDash
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
	default:
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	}
}

// fmtSLO writes an SLO target; 0 is none.
func fmtSLO(d measure.Duration) string {
	if d <= 0 {
		return "none"
	}
	return fmtDur(time.Duration(d))
}

// fmtPct writes a ratio as a percentage, "97.3%"; NaN is unknown.
func fmtPct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return unknownDash
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
}

// fmtNum writes a count or rate with at most two decimals: "12", "3.25"; NaN unknown.
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return unknownDash
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// fmtCount writes a count to three significant figures past 9999: "1024", "12.3k",
// "3.19M"; NaN unknown.
func fmtCount(v float64) string {
	switch a := math.Abs(math.Round(v)); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return unknownDash
	case a < 10000:
		return fmtNum(math.Round(v))
	case roundSig(a, 3) < 1e6:
		return fmtNum(roundSig(v, 3)/1e3) + "k"
	}
	return fmtNum(roundSig(v, 3)/1e6) + "M"
}

// fmtRate writes a rate as fmtNum does, but to two significant figures below 1, so that
// a small rate is not written as 0: "12.35", "0.42", "0.0033"; NaN unknown.
func fmtRate(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1 || v == 0 {
		return fmtNum(v)
	}
	return strconv.FormatFloat(roundSig(v, 2), 'f', -1, 64)
}

// roundSig rounds x (not 0) to n significant figures.
func roundSig(x float64, n int) float64 {
	p := math.Pow(10, float64(n-1)-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// fmtAge writes an elapsed time rounded to what a reader needs: "850ms", "12s", "3m4s".
func fmtAge(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtSpan writes a window's span: "5m", "90s".
func fmtSpan(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return fmtAge(d)
}

// fmtTime writes a moment in UTC with how long ago it was: "12:03:04 UTC (2m ago)".
func fmtTime(t, now time.Time) string {
	if t.IsZero() {
		return unknownDash
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC") + " (" + fmtAge(now.Sub(t)) + " ago)"
}
