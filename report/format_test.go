package report

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/synth"
)

func TestReportNumberFormats(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"big tok/s", fmtTokS(15600), "15,600"},
		{"tok/s", fmtTokS(970.41), "970"},
		{"tok/s tens", fmtTokS(34.47), "34.5"},
		{"tok/s units", fmtTokS(5.123), "5.12"},
		{"tok/s none", fmtTokS(0), dash},
		{"tok/s NaN", fmtTokS(math.NaN()), dash},
		{"tok/s Inf", fmtTokS(math.Inf(1)), dash},
		{"ms", fmtMS(14.932), "14,932"},
		{"ms small", fmtMS(0.00483), "4.83"},
		{"ms none", fmtMS(0), dash},
		{"req/s", fmtReqS(1.7499), "1.75"},
		{"req/s below one", fmtReqS(0.87495), "0.875"},
		{"count", fmtInt(2397), "2,397"},
		{"count millions", fmtInt(1069056), "1,069,056"},
		{"count zero", fmtInt(0), "0"},
		{"pct whole", fmtPct(1), "100%"},
		{"pct", fmtPct(191.0 / 192), "99.5%"},
		{"pct zero", fmtPct(0), "0%"},
		{"multiple", fmtMultiple(1.1), "1.1×"},
		{"negative", group(-1234.5, 1), "-1,234.5"},
		{"negative zero", group(-0.01, 0), "0"},
		{"duration", fmtDuration(time.Minute), "1m"},
		{"duration hours", fmtDuration(time.Hour), "1h"},
		{"duration mixed", fmtDuration(72*time.Minute + 14*time.Second), "1h12m14s"},
		{"span backwards", fmtSpan(fixtureStart, fixtureStart.Add(-time.Second)), dash},
		{"time", fmtTime(fixtureStart.In(time.FixedZone("CEST", 7200))), "2026-05-04 09:00:00 UTC"},
		{"tick ms", fmtDurationMS(200), "200 ms"},
		{"tick s", fmtDurationMS(20000), "20 s"},
		{"clip", clipRunes("CHAT-SUPER-LONG-NAME", 8), "CHAT-SU…"},
		{"state label", stateLabel(synth.OverCapacity), "Over capacity"},
		{"state label as is", stateLabel(synth.NotCompleted), "n/c"},
		{"state class", stateClass(synth.NotCompleted), "nc"},
		{"context label", synth.ContextLabel(257024), "251K"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestReportScanKnee: a scan's knee is slogate calibrate's, by its rule without a
// latency SLO unless the report carries the knee its maker chose.
func TestReportScanKnee(t *testing.T) {
	cell := func(m, rate, done, success float64, s synth.State) synth.Cell {
		return synth.Cell{Multiple: m, Rate: rate, CompletionRate: done, SuccessRate: success, State: s}
	}
	valid := func(m, rate, done float64) synth.Cell { return cell(m, rate, done, 1, synth.Valid) }
	marked := func(rate float64, rule string) synth.Report {
		return synth.Report{Cells: scanReport().Cells, Knee: &synth.KneeMark{Rate: rate, Rule: rule}}
	}
	tests := []struct {
		name     string
		rep      synth.Report
		want     int
		sentence string
	}{
		{"published scan", scanReport(), 1, "Knee: 0.8× (1.40 req/s offered, 1.40 req/s completed, p95 TTFT 3,550 ms) by slogate calibrate's rule, " +
			"without a latency SLO: 1.4 req/s is the highest sustainable rate; at 1.92 req/s marginal efficiency 0.51 from 1.4 req/s: " +
			"throughput no longer grows with the offered rate."},
		{"all sustained", synth.Report{Cells: []synth.Cell{valid(0.5, 1, 1), valid(1, 2, 1.95)}}, 1, "2 req/s, the highest rate measured, was sustainable."},
		{"exactly 95% of the requests completed", synth.Report{Cells: []synth.Cell{cell(0.5, 1, 0.95, 0.95, synth.Valid)}}, 0, ""},
		{"requests lost at the lowest rate", synth.Report{Cells: []synth.Cell{cell(0.5, 1, 0.9, 0.9, synth.Valid)}}, -1,
			"No knee: at the lowest rate, 1 req/s, 90% of the offered requests completed."},
		{"completions behind the lowest rate, every request completed", synth.Report{Cells: []synth.Cell{valid(0.5, 1, 0.5)}}, 0, ""},
		{"throughput flat", synth.Report{Cells: []synth.Cell{valid(0.5, 1, 1), valid(1, 2, 1.2)}}, 0, "marginal efficiency 0.20 from 1 req/s"},
		{"the first unsustainable rate ends the knee", synth.Report{Cells: []synth.Cell{valid(0.5, 1, 1), cell(1, 2, 1.5, 0.75, synth.Valid), valid(1.5, 3, 3)}}, 0,
			"at 2 req/s 75% of the offered requests completed"},
		{"invalid cells do not count", synth.Report{Cells: []synth.Cell{valid(0.5, 1, 1), cell(1, 2, 2, 1, synth.Failed)}}, 0, ""},
		{"highest rate, not last", synth.Report{Cells: []synth.Cell{valid(1, 2, 2), valid(0.5, 1, 1)}}, 0, ""},
		{"the knee the report carries", marked(1.9, "its own rule"), 2, "Knee: its own rule."},
		{"no knee the report carries", marked(0, "no rate was sustainable"), -1, "No knee: no rate was sustainable."},
		{"empty", synth.Report{}, -1, "No knee: no measured rate was sustainable."},
	}
	for _, tt := range tests {
		got, sentence := scanKnee(tt.rep)
		if got != tt.want || !strings.Contains(sentence, tt.sentence) {
			t.Errorf("%s: knee %d %q, want %d %q", tt.name, got, sentence, tt.want, tt.sentence)
		}
	}
}

func tickLabels(a axis) string {
	var s []string
	for _, t := range a.ticks {
		s = append(s, t.label)
	}
	return strings.Join(s, " ")
}

func TestReportAxes(t *testing.T) {
	tests := []struct {
		name   string
		a      axis
		lo, hi float64
		ticks  string
	}{
		{"linear", linearAxis(0, 2410, 5, plainNum), 0, 2500, "0 500 1,000 1,500 2,000 2,500"},
		{"linear fractions", linearAxis(0, 1.9249, 5, plainNum), 0, 2, "0 0.5 1 1.5 2"},
		{"linear flat", linearAxis(0, 0, 5, plainNum), 0, 1, "0 0.2 0.4 0.6 0.8 1"},
		{"log within a decade", logAxis(864, 6816, fmtDurationMS), 100, 10000, "100 ms 200 ms 500 ms 1 s 2 s 5 s 10 s"},
		{"log over decades", logAxis(0.5, 30000, fmtDurationMS), 0.1, 100000, "0.1 ms 1 ms 10 ms 100 ms 1 s 10 s 100 s"},
		{"log one value", logAxis(1000, 1000, fmtDurationMS), 1000, 10000, "1 s 2 s 5 s 10 s"},
		{"concurrency", valueAxis([]int{1, 16, 64}), 1, 64, "1 16 64"},
	}
	for _, tt := range tests {
		if tt.a.lo != tt.lo || tt.a.hi != tt.hi || tickLabels(tt.a) != tt.ticks {
			t.Errorf("%s: [%g, %g] ticks %q, want [%g, %g] %q", tt.name, tt.a.lo, tt.a.hi, tickLabels(tt.a), tt.lo, tt.hi, tt.ticks)
		}
	}
	// Bounds no measurement gives end the axis all the same.
	for _, hi := range []float64{math.Inf(1), math.NaN(), math.MaxFloat64, -1} {
		if a := linearAxis(0, hi, 5, plainNum); len(a.ticks) > 13 {
			t.Errorf("linearAxis(0, %g): %d ticks", hi, len(a.ticks))
		}
	}
	for _, b := range [][2]float64{{5e-324, math.MaxFloat64}, {math.NaN(), math.Inf(1)}, {1, math.NaN()}} {
		if a := logAxis(b[0], b[1], fmtDurationMS); len(a.ticks) > 3*700 {
			t.Errorf("logAxis(%g, %g): %d ticks", b[0], b[1], len(a.ticks))
		}
	}
	if f := (axis{lo: 1, hi: 64, log: true}).frac(8); math.Abs(f-0.5) > 1e-9 {
		t.Errorf("8 on a log axis 1..64 at %g, want 0.5", f)
	}
}

func TestReportRamp(t *testing.T) {
	if got := ramp(0); got != "#e0f3db" {
		t.Errorf("ramp(0) = %s", got)
	}
	if got := ramp(1); got != "#084081" {
		t.Errorf("ramp(1) = %s", got)
	}
	if ramp(-1) != ramp(0) || ramp(2) != ramp(1) || ramp(math.NaN()) != ramp(0) {
		t.Error("ramp does not clamp")
	}
}
