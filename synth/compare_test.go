package synth

import (
	"math"
	"testing"
)

// validCell returns a valid cell of row r at concurrency 8 whose rounds have the given
// throughputs and TTFT p95s; its figures are their medians, as Cell.finish sets them.
func validCell(r string, tputs, ttfts []float64) Cell {
	c := Cell{Row: r, Concurrency: 8}
	for i := range tputs {
		c.Rounds = append(c.Rounds, Round{Sent: 10, Succeeded: 10, Completed: 10, Throughput: tputs[i], TTFTp95: ttfts[i], TPOTp95: 0.02})
	}
	c.finish(0.06)
	return c
}

func TestCompare(t *testing.T) {
	tput, ttft := Headline[0], Headline[1]
	base := validCell("A", []float64{1000}, []float64{0.5})
	noisy := validCell("A", []float64{900, 1100, 1000}, []float64{0.5, 0.5, 0.5}) // spread 20%
	rej := Cell{Row: "A", Concurrency: 8, State: Rejected}
	tests := []struct {
		name      string
		base, cur Cell
		f         Figure
		want      Movement
		delta     float64
	}{
		{"more throughput beyond the agreement", base, validCell("A", []float64{1480}, []float64{0.5}), tput, Better, 0.48},
		{"less throughput beyond the agreement", base, validCell("A", []float64{880}, []float64{0.5}), tput, Worse, -0.12},
		{"a 5% change inside a 6% agreement", base, validCell("A", []float64{1050}, []float64{0.5}), tput, WithinNoise, 0.05},
		{"a 15% change inside the rounds' 20% spread", noisy, validCell("A", []float64{1150}, []float64{0.5}), tput, WithinNoise, 0.15},
		{"TTFT up is worse", base, validCell("A", []float64{1000}, []float64{0.75}), ttft, Worse, 0.5},
		{"TTFT down is better", base, validCell("A", []float64{1000}, []float64{0.25}), ttft, Better, -0.5},
		{"valid to rejected", base, rej, tput, StateChanged, 0},
		{"rejected in both", rej, rej, tput, NotMeasured, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := Compare(tt.base, tt.cur, tt.f, 0.06)
			if ch.Moved != tt.want || math.Abs(ch.Delta-tt.delta) > 1e-9 {
				t.Errorf("Compare = %s, delta %.4f (noise %.3f); want %s, delta %.4f", ch.Moved, ch.Delta, ch.Noise, tt.want, tt.delta)
			}
		})
	}
	if ch := Compare(noisy, base, tput, 0.06); ch.Noise < 0.199 || ch.Noise > 0.201 {
		t.Errorf("noise band = %v, want the noisy cell's spread of 0.2", ch.Noise)
	}
}

func TestRegressions(t *testing.T) {
	w := Workload{Agreement: 0.06}
	base := Report{Workload: w, Cells: []Cell{
		validCell("A", []float64{1000}, []float64{0.5}),
		validCell("B", []float64{1000}, []float64{0.5}),
		{Row: "C", Concurrency: 8, State: Rejected},
		validCell("D", []float64{1000}, []float64{0.5}),
	}}
	slower := validCell("A", []float64{700}, []float64{0.5})
	cur := Report{Workload: w, Cells: []Cell{
		slower,
		{Row: "B", Concurrency: 8, State: NotCompleted},
		validCell("C", []float64{1000}, []float64{0.5}), // became valid: not a regression
		validCell("D", []float64{1010}, []float64{0.51}),
		validCell("E", []float64{1}, []float64{9}), // new: nothing to compare with
	}}
	got := map[CellKey][]string{}
	for _, r := range Regressions(base, cur) {
		got[r.Key] = append(got[r.Key], r.Figure.Name)
	}
	if len(got) != 2 || len(got[CellKey{"A", "8"}]) != 1 || got[CellKey{"A", "8"}][0] != "output_tok_per_s" || len(got[CellKey{"B", "8"}]) != len(Headline) {
		t.Errorf("regressions = %v; want A's throughput, and every figure of B (valid to n/c)", got)
	}
}

func TestCellLoad(t *testing.T) {
	for _, tt := range []struct {
		c    Cell
		want string
	}{{Cell{Concurrency: 64}, "64"}, {Cell{Multiple: 1.5, Concurrency: 3}, "1.5x"}, {Cell{Multiple: 2}, "2x"}} {
		if got := tt.c.Load(); got != tt.want {
			t.Errorf("Load of %+v = %q, want %q", tt.c, got, tt.want)
		}
	}
}
