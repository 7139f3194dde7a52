//go:build race

package simtest

// Race reports whether the tests run under the race detector, which slows every memory
// access, and with it a load of hundreds of clients, several times over.
const Race = true
