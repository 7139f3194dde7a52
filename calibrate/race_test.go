//go:build race

package calibrate

// raceEnabled reports whether the tests run under the race detector, which slows the
// simulator's prompt decoding far past the model time it keeps.
const raceEnabled = true
