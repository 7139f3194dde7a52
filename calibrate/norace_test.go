//go:build !race

package calibrate

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
