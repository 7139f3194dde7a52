//go:build !race

package simtest

// Race reports whether the tests run under the race detector.
const Race = false
