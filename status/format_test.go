package status

import (
	"math"
	"testing"
)

// TestFmtCount: counts up to 9999 are written whole, larger ones to three significant
// figures in thousands or millions, rounding up into the next unit where it must.
func TestFmtCount(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {41.7, "42"}, {1024, "1024"}, {9999, "9999"}, {9999.6, "10k"}, {12345, "12.3k"},
		{250000, "250k"}, {999499, "999k"}, {999999, "1M"}, {3187345.5, "3.19M"}, {4e6, "4M"},
		{-12345, "-12.3k"}, {math.NaN(), "–"}, {math.Inf(1), "–"},
	} {
		if got := fmtCount(tc.v); got != tc.want {
			t.Errorf("fmtCount(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestFmtRate: rates of 1 and more take two decimals, smaller ones two significant
// figures, so that one request in five minutes is not written as none.
func TestFmtRate(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {12.345, "12.35"}, {1, "1"}, {0.42, "0.42"}, {1.0 / 300, "0.0033"}, {1.0 / 3600, "0.00028"},
		{0.999, "1"}, {math.NaN(), "–"},
	} {
		if got := fmtRate(tc.v); got != tc.want {
			t.Errorf("fmtRate(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
