//go:build race

package main

// raceEnabled reports whether the tests run under the race detector, which slows a
// virtual run's thousands of admission decisions and engine steps a hundredfold.
const raceEnabled = true
