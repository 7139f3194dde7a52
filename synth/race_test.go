//go:build race

package synth

// raceEnabled reports whether the tests run under the race detector, which slows every
// memory access and with it the HTTP path the accuracy test measures.
const raceEnabled = true
