package main

import (
	"strings"
	"testing"
	"time"
)

// row builds one level's cells from goodput figures and admitted counts: each entry is
// name, good, offered, rejected over a 100 s window.
func row(level float64, cells ...any) []cell {
	var out []cell
	for i := 0; i+3 < len(cells); i += 4 {
		good, offered, rejected := cells[i+1].(int), cells[i+2].(int), cells[i+3].(int)
		out = append(out, cell{Level: level, Name: cells[i].(string), Sum: summary{
			Good: good, Offered: offered, Rejected: rejected, Window: 100 * time.Second, Goodput: float64(good) / 100,
		}})
	}
	return out
}

func TestCompareVerdicts(t *testing.T) {
	tests := []struct {
		name string
		cs   [][]cell
		want map[string]bool // target prefix -> met
	}{{
		name: "every target met",
		cs: [][]cell{
			row(1, nameSlogate, 130, 130, 0, nameCalibrated, 130, 130, 0),
			row(2, nameSlogate, 150, 260, 100, nameCalibrated, 170, 260, 89),
			row(5, nameSlogate, 140, 650, 500, nameCalibrated, 160, 650, 489),
		},
		want: map[string]bool{
			"at 2× keeps":    true, // 1.70 of the best 1.70
			"at 2× beats":    true,
			"at 5× keeps":    true, // 1.60 = 94% of 1.70
			"at 5× beats":    true,
			"at 1× admitted": true,
			"at 2× admitted": true, // 170 of 171
			"at 5× admitted": true, // 160 of 161
		},
	}, {
		name: "short of the best at 5×, tied at 2×, admitted requests missing",
		cs: [][]cell{
			row(1.5, nameStatic, 150, 200, 40, nameCalibrated, 150, 200, 40),
			row(2, nameStatic, 200, 260, 50, nameCalibrated, 180, 260, 60),
			row(5, nameStatic, 190, 650, 450, nameCalibrated, 170, 650, 470),
		},
		want: map[string]bool{
			"at 1.5× beats":    false, // a tie is no win
			"at 1.5× admitted": false, // 150 of 160
			"at 2× keeps":      false, // 1.80 = 90% of 2.00
			"at 2× beats":      false,
			"at 2× admitted":   false,
			"at 5× keeps":      false, // 1.70 = 85%
			"at 5× beats":      false,
			"at 5× admitted":   false, // 170 of 180
		},
	}, {
		name: "no calibrated configuration: nothing to judge",
		cs:   [][]cell{row(2, nameSlogate, 100, 200, 100)},
		want: map[string]bool{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compareVerdicts(tt.cs)
			if len(got) != len(tt.want) {
				t.Errorf("%d verdicts, want %d: %+v", len(got), len(tt.want), got)
			}
			for _, v := range got {
				met, ok := lookup(tt.want, v.Target)
				switch {
				case !ok:
					t.Errorf("unexpected verdict %q", v.Target)
				case v.Met != met:
					t.Errorf("%s: met %v, want %v (%s)", v.Target, v.Met, met, v.Detail)
				}
			}
		})
	}
}

// lookup finds the expectation whose key the target starts with.
func lookup(want map[string]bool, target string) (bool, bool) {
	for k, v := range want {
		if strings.HasPrefix(target, k) {
			return v, true
		}
	}
	return false, false
}

func TestParseArrivals(t *testing.T) {
	got, err := parseArrivals(" poisson , bursty", 3)
	if err != nil || len(got) != 2 || got[0] != (arrivalKind{"poisson", 1}) || got[1] != (arrivalKind{"bursty", 3}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []struct {
		s  string
		cv float64
	}{{"", 3}, {"uniform", 3}, {"bursty", 0}, {"bursty", -1}, {"poisson", 1e9}} {
		if _, err := parseArrivals(bad.s, bad.cv); err == nil {
			t.Errorf("parseArrivals(%q, %v): no error", bad.s, bad.cv)
		}
	}
}
