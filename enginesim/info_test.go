package enginesim

import "testing"

// TestPyFloat: floats in vLLM's info labels read as Python's str() writes them.
func TestPyFloat(t *testing.T) {
	for v, want := range map[float64]string{
		512: "512.0", 16.8310546875: "16.8310546875", 0.9: "0.9", 0.0001: "0.0001", 1.5e-05: "1.5e-05",
		0: "0.0", 1e16: "1e+16", 2.5e20: "2.5e+20",
	} {
		if got := pyFloat(v); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", v, got, want)
		}
	}
}
